#!/bin/sh
# stackmgr rebase vs git rebase when upstream moved the file a patch changes (field/known.toml):
# git rebase carries the fix to new.txt; stackmgr rebase stops, exit 3. Run in an empty directory, with
# stackmgr on PATH.
set -e
export HOME=$PWD GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$PWD/gitconfig
printf '[user]\n\tname = R\n\temail = r@example.com\n[init]\n\tdefaultBranch = main\n' > gitconfig
git init -q tree && cd tree
seq 1 20 > old.txt && git add . && git commit -qm base && base=$(git rev-parse HEAD)
git checkout -q -b stack && sed -i 's/^5$/five/' old.txt && git commit -qam "fix line 5"
git checkout -q main && git mv old.txt new.txt && git commit -qm "upstream: move old.txt to new.txt"
upstream=$(git rev-parse HEAD)
cd .. && stackmgr init store >/dev/null && stackmgr --store store tree add t "$PWD/tree" >/dev/null
git -C tree format-patch -q -o "$PWD/mails" "$base..stack"
stackmgr --store store import --series S --base "$base" mails/*.patch >/dev/null
echo "== git rebase:"; git -C tree rebase -q "$upstream" stack && git -C tree show --stat --format=%s HEAD | head -3
echo "== stackmgr rebase:"; stackmgr --store store rebase S --onto "$upstream" || echo "exit $?"
