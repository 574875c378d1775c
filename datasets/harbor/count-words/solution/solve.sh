#!/bin/bash
mkdir -p /app/counts
for f in /app/texts/*; do
  wc -w < "$f" | tr -d ' ' > "/app/counts/$(basename "$f").count"
done
