# Assertions of the CLI tests (sourced). Each prints "ok" or "FAIL" and sets fail=1 on a
# failure; the test ends with `exit $fail`.
fail=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1: expected [$2], got [$3]"
    fail=1
  fi
}
contains() {  # contains NAME NEEDLE HAYSTACK
  case "$3" in *"$2"*) echo "ok   $1" ;; *) echo "FAIL $1: [$2] not in [$3]"; fail=1 ;; esac
}
