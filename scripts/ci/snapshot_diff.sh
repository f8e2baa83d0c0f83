#!/usr/bin/env bash
# Markdown for a pull request's job summary: how the synthesized templates differ.
#
#   scripts/ci/snapshot_diff.sh [BASE_REF] >>"$GITHUB_STEP_SUMMARY"
#
# 1. The snapshots the pull request changes against BASE_REF (a reviewed template
#    change comes with its updated snapshots, made with --snapshot-update).
# 2. The templates that differ from the committed snapshots (what `make test`
#    fails on): the snapshot tests are run again with --snapshot-update and the
#    working tree's diff is shown; the checkout is a throw-away CI copy.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."

base="${1:-}"
snapshots=(tests/snapshot/__snapshots__)
limit=60000   # the job summary takes at most 1 MiB; a long diff is cut here

show_diff() {
    local file
    file="$(mktemp)"
    git diff "$@" -- "${snapshots[@]}" >"$file"
    echo '<details><summary>diff</summary>'
    echo
    echo '```diff'
    head -c "$limit" "$file"
    [[ $(wc -c <"$file") -le $limit ]] || printf '\n... cut at %s bytes\n' "$limit"
    echo '```'
    echo '</details>'
    rm -f "$file"
}

echo "## Template snapshots"
if [[ -n "$base" ]]; then
    echo
    echo "### Changed by this pull request (against ${base})"
    if git diff --quiet "${base}...HEAD" -- "${snapshots[@]}"; then
        echo "No snapshot changes."
    else
        echo '```'
        git diff --stat "${base}...HEAD" -- "${snapshots[@]}"
        echo '```'
        show_diff "${base}...HEAD"
    fi
fi

echo
echo "### Templates that differ from the committed snapshots"
.venv/bin/python -m pytest -o addopts="" -q -p no:cacheprovider \
    tests/snapshot --snapshot-update >/dev/null 2>&1 || true
git add --intent-to-add -- "${snapshots[@]}"   # a new stack's snapshot shows in the diff too
if git diff --quiet -- "${snapshots[@]}"; then
    echo "None: every template matches its snapshot."
else
    tick='`'
    echo "If the change is meant, update them with ${tick}.venv/bin/python -m pytest tests/snapshot --snapshot-update${tick}:"
    echo '```'
    git diff --stat -- "${snapshots[@]}"
    echo '```'
    show_diff
fi
