#!/usr/bin/env bash
# Fails on any tracked C++/CUDA file that clang-format would change.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' 2>/dev/null || true)
if ((${#files[@]} == 0)); then
  mapfile -t files < <(find common tokenizer tools kernels tests bench -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' 2>/dev/null | grep -v node_modules)
fi
bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not clang-formatted: $f (fix: clang-format -i $f)"
    bad=1
  fi
done
echo "check_format: ${#files[@]} files checked"
exit $bad
