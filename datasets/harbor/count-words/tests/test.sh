#!/bin/bash
# Partial credit: one component per text (1 when its count is right), reward = their mean.
a=0; b=0
[ "$(tr -d ' \n' < /app/counts/a.txt.count 2>/dev/null)" = "4" ] && a=1
[ "$(tr -d ' \n' < /app/counts/b.txt.count 2>/dev/null)" = "8" ] && b=1
python3 -c "import json; print(json.dumps({'reward': ($a + $b) / 2, 'a': $a, 'b': $b}))" > /logs/verifier/reward.json
