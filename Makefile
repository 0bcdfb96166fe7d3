# Dovetail. `make run` prints a story from the embedded model with its speed;
# `make test` runs every test.
GO      ?= go
BIN     := bin
PROMPT  ?= Once upon a time
FUZZTIME ?= 60s

.PHONY: build run test bench fuzz clean

build:
	$(GO) build -o $(BIN)/dovetail ./app/dovetail

run: build
	$(BIN)/dovetail run -p "$(PROMPT)" -n 200

test:
	$(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1s ./quant/ ./cpu/

fuzz:
	cd models/gguf && $(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean:
	rm -rf $(BIN)
	$(GO) clean -testcache
