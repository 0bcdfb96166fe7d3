#!/usr/bin/env bash
# Regenerates the embedding references in this directory with llama.cpp's
# llama-embedding (see README.md here): every test model file × 3 prompts,
# mean pooling, Euclidean normalisation, one thread.
#   LLAMA=/path/to/llama.cpp/build/bin ./make.sh
set -euo pipefail
cd "$(dirname "$0")"
LLAMA=${LLAMA:-/work/peers/llama.cpp/build/bin}
MODELS=../../models
prompts=(
  "Once upon a time"
  "Lily and Tom went to the park. They saw"
  "One day, a little girl named Lily found a needle in her room. She knew it was difficult to play with it because it was sharp. Lily wanted to share the needle with her mom, so she could sew a button on her shirt. She went to her mom and said"
)
for f in "$MODELS"/stories260K/*.gguf "$MODELS"/tinystories656K/*.gguf; do
  name=$(basename "$f" .gguf)
  out=()
  for i in "${!prompts[@]}"; do
    p=${prompts[$i]}
    json=$("$LLAMA/llama-embedding" -m "$f" -c 0 -t 1 --pooling mean --embd-normalize 2 \
      --embd-output-format json --verbose-prompt -p "$p" 2>"$name.log")
    # --verbose-prompt prints "  ID -> 'piece'" lines before the JSON.
    toks=$(grep -E '^ *[0-9]+ -> ' <<<"$json" | awk '{print $1}' | paste -sd, -)
    vec=$(sed -n '/"embedding": \[/{s/.*"embedding": \[\(.*\)\].*/\1/p}' <<<"$json")
    out+=("{\"name\":\"p$((i+1))\",\"prompt\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$p"),\"tokens\":[$toks],\"embedding\":[$vec]}")
  done
  rm -f "$name.log"
  (IFS=,; printf '{"model":"%s","cases":[%s]}\n' "$(basename "$f")" "${out[*]}") | python3 -m json.tool --compact >"$name.json"
done
