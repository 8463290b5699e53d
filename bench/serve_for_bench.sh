# Sourced by bench scripts: start_baton_serve BUILD_DIR OUT_DIR [serve flags...] starts one
# `baton serve` on free ports in the background (its output in OUT_DIR/serve and
# OUT_DIR/err), waits until it is ready, and sets `url` to its HTTP address. The caller's
# EXIT trap should kill its jobs.
start_baton_serve() {
  local build=$1 out=$2
  shift 2
  "$build/bin/baton" serve --port 0 --grpc-port -1 "$@" >"$out/serve" 2>"$out/err" &
  url=""
  for _ in $(seq 1 600); do
    url=$(grep -o "http://[0-9.]*:[0-9]*" "$out/serve" 2>/dev/null | head -1 || true)
    [ -n "$url" ] && curl -sf "$url/ready" >/dev/null && return 0
    sleep 0.2
  done
  cat "$out/err" >&2
  return 1
}
