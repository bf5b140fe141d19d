#!/bin/sh
# git-obversa hook shim: a push to a remote set up by `git obversa install --sync`
# also syncs memory (fetch, three-way merge, leased push: never forced). Whatever happens
# to memory, this shim exits 0: the push itself goes on exactly as git decides.
# `git obversa install --sync` copies this file in and fills the region below
# (git_obversa/hooks/install.py holds the values).
# A hook that was here before `git obversa install` runs first; uninstall restores it.

# start templated
kept_suffix=
# end templated

if [ -x "$0$kept_suffix" ]; then
	"$0$kept_suffix" "$@" || exit $?
fi
[ "$(git config --type=bool "remote.$1.obversasync" 2>/dev/null)" = true ] || exit 0
if ! command -v git-obversa >/dev/null 2>&1; then
	echo "warning: git-obversa is not on PATH; memory was not synced with $1" >&2
	exit 0
fi
git-obversa memory sync -- "$1" </dev/null >&2 ||
	echo "warning: memory was not synced with $1 (the push goes on);" \
		"run: git obversa memory sync $1" >&2
exit 0
