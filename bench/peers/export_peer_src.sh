#!/usr/bin/env bash
# Export a peer's source tree (llama.cpp, llama2.c) from a bare git directory, such as the
# mirrors the fetch tool leaves under /work/.mirror/OWNER+NAME/repo, and record which commit
# it is in DEST/.peer-commit (the exported tree has no .git, so the build scripts read this).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/peers/export_peer_src.sh GIT_DIR DEST [REV]

  GIT_DIR  a git directory (bare or .git) holding the peer's history
  DEST     directory to export into (created; must be empty or absent)
  REV      revision to export (default HEAD)

Large binary files that a snapshot may lack (llama.cpp's models/*.gguf vocab fixtures)
are left out; nothing the peers' builds need is in them.
USAGE
}

if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ $# -lt 2 || $# -gt 3 ]]; then usage >&2; exit 2; fi
git_dir=$1 dest=$2 rev=${3:-HEAD}

if [[ -e $dest && -n $(ls -A "$dest" 2>/dev/null) ]]; then
  echo "export_peer_src: $dest is not empty" >&2; exit 1
fi
mkdir -p "$dest"
commit=$(git --git-dir="$git_dir" rev-parse "$rev^{commit}")
git --git-dir="$git_dir" archive "$commit" -- . ':(exclude)models/*.gguf' | tar -x -C "$dest"
{
  echo "commit=$commit"
  echo "describe=$(git --git-dir="$git_dir" describe --tags "$commit" 2>/dev/null || echo none)"
  echo "date=$(git --git-dir="$git_dir" log -1 --format=%cI "$commit")"
} > "$dest/.peer-commit"
echo "exported $commit into $dest"
cat "$dest/.peer-commit"
