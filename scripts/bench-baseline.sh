#!/bin/sh
# Makes a copy of Floodgate at an earlier commit for the benchmarks' `--baseline <dir>`:
#   scripts/bench-baseline.sh <commit> [dir]      (dir defaults to /tmp/fg-baseline)
# The commit's files are exported with `git archive` (no worktree is registered), the current
# tree's node_modules are linked in entry by entry, except `@floodgate/*`, which point at the
# copy's own packages (so the copy's adapters load the copy's core), then its packages are built.
set -eu
commit=${1:?usage: scripts/bench-baseline.sh <commit> [dir]}
dir=${2:-/tmp/fg-baseline}
root=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$root/node_modules" ] || { echo "no node_modules in $root: run npm ci first" >&2; exit 1; }
case "$dir" in "$root"|"$root"/*) echo "the baseline must live outside the working tree" >&2; exit 1;; esac

rm -rf "$dir"
mkdir -p "$dir/node_modules/@floodgate"
git -C "$root" archive "$commit" | tar -x -C "$dir"
for entry in "$root"/node_modules/* "$root"/node_modules/.bin "$root"/node_modules/.package-lock.json; do
  name=$(basename "$entry")
  [ "$name" = "@floodgate" ] || [ ! -e "$entry" ] || ln -s "$entry" "$dir/node_modules/$name"
done
for pkg in "$dir"/packages/*/; do
  name=$(basename "$pkg")
  ln -s "../../packages/$name" "$dir/node_modules/@floodgate/$name"
done
(cd "$dir" && npm run build --silent >/dev/null)
echo "$dir: $(git -C "$root" rev-parse --short "$commit") ($(git -C "$root" log -1 --format=%s "$commit" | cut -c1-60)), built"
