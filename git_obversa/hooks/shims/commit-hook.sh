#!/bin/sh
# git-obversa hook shim: writes this worktree's captured reasoning into the commit message
# (prepare-commit-msg; commit-msg after an editor that showed it), after the commit keeps
# the captured turns it carries for its record (post-commit), and after an amend or a
# rebase lets each rewritten commit find its record (post-rewrite).
# `git obversa install` copies this file in as each of those hooks and fills the region
# below (git_obversa/hooks/install.py holds the values; see docs/reasoning.md).
# Python starts only when something is pending for this worktree.
# A hook that was here before `git obversa install` runs first; uninstall restores it.

# start templated
hook=
kept_suffix=
runtime=
lean_entry=
composed_plain=
composing_modules=
replay_state=
config_pattern=
records_ref=
attribute_marker=
attribute_hook=
picked_marker=
attribution_config=
notes_refs=
# end templated

# post-rewrite reads the commits git rewrote on stdin: a kept hook gets them too.
[ "$hook" != post-rewrite ] || rewritten=$(cat)
if [ -x "$0$kept_suffix" ]; then
	if [ "$hook" = post-commit ]; then
		"$0$kept_suffix" "$@"
	elif [ "$hook" = post-rewrite ]; then
		printf '%s\n' "$rewritten" | "$0$kept_suffix" "$@"
	else
		"$0$kept_suffix" "$@" || exit $?
	fi
fi
# This worktree's own git dir, without starting git when possible: git exports GIT_DIR
# to the hooks of linked worktrees, and runs hooks at the top of the worktree.
if [ -n "$GIT_DIR" ]; then
	gitdir=$GIT_DIR
elif [ -d .git ]; then
	gitdir=.git
else
	gitdir=$(git rev-parse --git-dir) || exit 0
fi
store=$gitdir/obversa/record
# What is pending decides, before sh reads the functions below: with nothing to do, a
# hook ends here.
case $hook in
prepare-commit-msg)
	[ ! -e "$store/claim" ] || rm -f "$store/claim"
	[ ! -e "$store/deferred" ] || rm -f "$store/deferred"
	[ ! -e "$store/$attribute_marker" ] || rm -f "$store/$attribute_marker"
	[ ! -e "$store/$picked_marker" ] || rm -f "$store/$picked_marker"
	# A cherry-pick: post-commit gives the new commit notes from the picked one's. A
	# rebase's picks have CHERRY_PICK_HEAD too: post-rewrite gives theirs, all at once.
	if [ -e "$gitdir/CHERRY_PICK_HEAD" ] && [ ! -d "$gitdir/rebase-merge" ] &&
		[ ! -d "$gitdir/rebase-apply" ] && IFS= read -r picked < "$gitdir/CHERRY_PICK_HEAD"; then
		[ -d "$store" ] || mkdir -p "$store"
		printf '%s\n' "$picked" > "$store/$picked_marker"
	fi
	# Aider has no hooks: its chat history, written before it commits, is read when it changed.
	history=.aider.chat.history.md read=$store/agents/aider/read
	if [ -f "$history" ] && { [ ! -e "$read" ] || [ "$history" -nt "$read" ]; }; then
		git obversa record ingest --aider "$history" >/dev/null 2>&1 || :
	fi
	[ -s "$store/turns.jsonl" ] || [ -s "$store/claimed.jsonl" ] || exit 0
	;;
commit-msg)
	# Python only when prepare-commit-msg left reasoning waiting for the editor.
	[ -e "$store/deferred" ] || exit 0
	;;
post-commit)
	# prepare-commit-msg moved the turns to claimed.jsonl and left the file `claim`; if
	# the commit kept its Obversa-Record-Id trailer (the block may be deleted in the
	# editor), they are kept as kept-<id>.jsonl, which the next git-obversa run writes
	# into the commit's record (git_obversa/record/kept.py). No Python, unless
	# `obversa.attribution` asked for notes of who wrote the lines (the marker beside the
	# claim): Python writes them from claimed.jsonl, so before it is moved. After a
	# cherry-pick (the marker prepare-commit-msg left), the same, from the picked commit's
	# notes.
	if [ -e "$store/$picked_marker" ]; then
		if [ -n "$(git config --get "$attribution_config")" ] && [ -r "${0%/*}/$runtime" ] && {
			IFS= read -r python && IFS= read -r package
		} < "${0%/*}/$runtime"; then
			"$python" -I -S -c "$lean_entry" "$package" "$gitdir" "$attribute_hook" picked
		fi
		[ ! -e "$store/$picked_marker" ] || rm -f "$store/$picked_marker"
	fi
	[ -e "$store/claim" ] || exit 0
	carried=$(git log -1 --format='%(trailers:key=Obversa-Record-Id,valueonly)' HEAD) || exit 0
	id=${carried##*[!0123456789abcdef]}
	if [ ${#id} -eq 16 ]; then
		if [ -e "$store/$attribute_marker" ] && [ -r "${0%/*}/$runtime" ] && {
			IFS= read -r python && IFS= read -r package
		} < "${0%/*}/$runtime"; then
			"$python" -I -S -c "$lean_entry" "$package" "$gitdir" "$attribute_hook"
		fi
		mv -f "$store/claimed.jsonl" "$store/kept-$id.jsonl" 2>/dev/null
		rm -f "$store/claim" "$store/$composed_plain" "$store/$attribute_marker"
	else
		rm -f "$store/claim" "$store/$attribute_marker"
	fi
	exit 0
	;;
post-rewrite)
	# Python only when this repository keeps records or notes of who wrote the lines, or
	# has records waiting to be kept.
	rewrite_kind=$1
	if [ -z "$(git for-each-ref --count=1 --format=x "$records_ref" $notes_refs)" ]; then
		set -- "$store"/kept-*
		[ -e "$1" ] || exit 0
	fi
	;;
esac
nl='
'

lines_into() { # COUNT NAME: that many lines of stdin, each with its newline, into NAME
	text= counted=0
	while [ "$counted" -lt "$1" ]; do
		IFS= read -r line || return 1
		text=$text$line$nl counted=$((counted + 1))
	done
	eval "$2=\$text"
}

# Git's trailer rule: whether lines FIRST..LAST (the variables line<N>) are a paragraph
# `git interpret-trailers` takes as trailers. The rule's home is `is_trailer_paragraph`
# in git_obversa/record/message.py; this mirrors it (tests/test_shims.py runs both).
is_trailer_paragraph() { # FIRST LAST
	trailers=0 others=0 generated= above=other number=$1
	while [ "$number" -le "$2" ]; do
		eval "line=\$line$number"
		case $line in
		"Signed-off-by: "* | "(cherry picked from commit "*)
			trailers=$((trailers + 1)) generated=1 above=trailer ;;
		[' 	']*) [ "$above" = trailer ] || others=$((others + 1)) ;;
		*:*)
			token=${line%%:*}
			while :; do case $token in *[' 	']) token=${token%?} ;; *) break ;; esac; done
			case $token in
			'' | *[!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-]*)
				others=$((others + 1)) above=other ;;
			*) trailers=$((trailers + 1)) above=trailer ;;
			esac ;;
		*) others=$((others + 1)) above=other ;;
		esac
		number=$((number + 1))
	done
	[ "$trailers" -gt 0 ] && { [ "$others" -eq 0 ] ||
		{ [ -n "$generated" ] && [ $((trailers * 3)) -ge "$others" ]; }; }
}

# A plain message (`-m`, `-F`) and turns composed ahead (`composed.plain`, written by
# `compose_ahead` of git_obversa/record/composition.py; whatever changes the turns removes
# it first): the Why: block and trailers go in right here, as `insert_reasoning` of
# record/message.py puts them into a message that has neither yet: after the user's
# text, above a closing trailer paragraph. Anything else (a comment line, `Why:`, an
# `Obversa-Record` line, other line breaks, a changed setting or package, a replay)
# returns 1, and Python does it.
write_composed() { # MESSAGE-FILE SOURCE
	[ "$2" = message ] && [ -s "$store/turns.jsonl" ] && [ ! -e "$store/claimed.jsonl" ] &&
		[ -r "$store/$composed_plain" ] && [ -r "${0%/*}/$runtime" ] || return 1
	for state in $replay_state; do
		[ ! -e "$gitdir/$state" ] || return 1
	done
	{ IFS= read -r python && IFS= read -r package; } < "${0%/*}/$runtime" || return 1
	{
		IFS= read -r id && IFS= read -r composed_package && IFS= read -r char &&
			IFS= read -r settings_count && IFS= read -r why_count && IFS= read -r added_count &&
			case $settings_count.$why_count.$added_count in
			*[!0123456789.]* | .* | *..* | *.) false ;;
			esac &&
			lines_into "$settings_count" settings && lines_into "$why_count" why &&
			lines_into "$added_count" added
	} < "$store/$composed_plain" || return 1
	[ "$composed_package" = "$package" ] || return 1
	for module in $composing_modules; do
		[ ! "$package/git_obversa/$module" -nt "$store/$composed_plain" ] || return 1
	done
	config=$(git config --get-regexp "$config_pattern")
	[ "${config:+$config$nl}" = "$settings" ] || return 1
	breaks=$(printf '\r\013\014\034\035\036_\302\205_\342\200\250_\342\200\251')
	control=${breaks%%_*} breaks=${breaks#*_} nel=${breaks%%_*} breaks=${breaks#*_}
	ls=${breaks%_*} ps=${breaks#*_}
	count=0 last=0 start=1
	while IFS= read -r line || [ -n "$line" ]; do
		count=$((count + 1))
		case $line in
		"$char"* | *[$control]* | *"$nel"* | *"$ls"* | *"$ps"* | Why: | *Obversa-Record*)
			return 1 ;;
		*[!' 	']*)
			case $line in
			*[ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789]*) ;;
			*) return 1 ;; # blank or not, by Python's rule? Python decides
			esac
			[ "$last" -eq $((count - 1)) ] || start=$count
			last=$count kind=text ;;
		*) kind=blank ;;
		esac
		[ "$count" -le 200 ] || return 1
		eval "line$count=\$line kind$count=\$kind"
	done < "$1"
	[ "$last" -gt 0 ] || return 1
	end=$last
	if [ "$start" -gt 1 ] && is_trailer_paragraph "$start" "$last"; then
		end=$((start - 1))
		while [ "$end" -gt 0 ] && eval "[ \"\$kind$end\" = blank ]"; do end=$((end - 1)); done
	else
		start=$((last + 1))
	fi
	out= number=1
	while [ "$number" -le "$end" ]; do
		eval "out=\$out\$line$number\$nl" number=$((number + 1))
	done
	out=$out$why number=$start
	while [ "$number" -le "$last" ]; do
		eval "out=\$out\$line$number\$nl" number=$((number + 1))
	done
	# Claimed first, as in Python. A change of the turns since composed.plain was read
	# removed it first: then they stay claimed (still pending) and Python composes.
	mv -f "$store/turns.jsonl" "$store/claimed.jsonl" || return 1
	IFS= read -r now 2>/dev/null < "$store/$composed_plain" && [ "$now" = "$id" ] || return 1
	printf '%s' "$out$added" > "$1" || return 1
	: > "$store/claim"
	case $nl$config in # post-commit then writes who wrote the lines (git_obversa.attribution)
	*"${nl}obversa.attribution "?*) : > "$store/$attribute_marker" ;;
	esac
}

# Runs the hook in Python (the lean way when the runtime file names a working
# interpreter: `python -I -S`, no `site`; else `git-obversa hook NAME ARGS...`) and
# fails open: whatever keeps it from working (not on PATH, a stale virtual environment
# whose interpreter is gone) lets the commit proceed with one warning line, unless
# obversa.strict is set.
run_obversa() { # HOOK-NAME ARGS...
	python= package=
	[ ! -r "${0%/*}/$runtime" ] || {
		IFS= read -r python
		IFS= read -r package
	} < "${0%/*}/$runtime"
	if [ -x "$python" ] && [ -d "$package/git_obversa" ]; then
		"$python" -I -S -c "$lean_entry" "$package" "$gitdir" "$@"
		status=$?
		[ "$status" -ne 0 ] || exit 0
		what="git-obversa could not start (exit $status)"
	elif obversa=$(command -v git-obversa); then
		IFS= read -r shebang < "$obversa" || shebang=
		case $shebang in
		"#!"*) interpreter=${shebang#??} interpreter=${interpreter# } ;;
		*) interpreter=/bin/sh ;;
		esac
		interpreter=${interpreter%% *}
		if [ ! -x "$interpreter" ]; then
			status=127
			what="git-obversa cannot start: its interpreter $interpreter is gone"
		else
			"$obversa" hook "$@"
			status=$?
			[ "$status" -ne 0 ] || exit 0
			what="git-obversa could not start (exit $status)"
		fi
	else
		status=127
		what="git-obversa is not on PATH"
	fi
	if [ "$(git config --type=bool obversa.strict)" = true ]; then
		# Exit 1 is git-obversa's own refusal, already said in one line.
		[ "$status" -eq 1 ] || echo "git obversa hook $1: $what (obversa.strict is set)" >&2
		exit 1
	fi
	echo "warning: $what; the commit proceeds without reasoning" >&2
	exit 0
}

if [ "$hook" = prepare-commit-msg ] && write_composed "$@"; then
	exit 0
fi
if [ "$hook" = post-rewrite ]; then
	run_obversa "$hook" "$rewrite_kind" <<EOF
$rewritten
EOF
fi
run_obversa "$hook" "$@"
