#!/usr/bin/env bash
# Every tracked C++ file is formatted with the checked-in .clang-format.
# Skips (exit 77) where clang-format is not installed.
set -u
cd "$1" || exit 2
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=$((bad + 1))
  fi
done < <(git ls-files '*.cc' '*.h' 2>/dev/null)
echo "format: $bad files differ from .clang-format"
[ "$bad" -eq 0 ]
