# Dovetail. `make run` prints a story from the embedded model with its speed;
# `make test` runs every test.
GO      ?= go
BIN     := bin
PROMPT  ?= Once upon a time
FUZZTIME ?= 60s

.PHONY: build desktop screenshots run test bench fuzz clean kernels ptx

# Kernel libraries: cpu/kernels/c/*.c compiled once per ISA level of the host
# architecture into cpu/kernels/lib, where //go:embed picks them up (see
# cpu/kernels/lib/README.md). Without a C compiler this warns and builds
# nothing, and the binary runs the pure-Go kernels.
CC      ?= cc
GOARCH  := $(shell $(GO) env GOARCH)
KDIR    := cpu/kernels
KSRC    := $(wildcard $(KDIR)/c/*.c)
KHDR    := $(wildcard $(KDIR)/c/*.h)
KCFLAGS := -std=gnu11 -O3 -fPIC -shared -fvisibility=hidden -ffp-contract=off -fno-math-errno -Wall -Wextra -Werror=implicit-function-declaration
KLEVELS_amd64 := generic avx2 avxvnni avx512
KLEVELS_arm64 := generic neon
KFLAGS_generic_amd64 := -march=x86-64 -mtune=generic
KFLAGS_avx2_amd64    := -march=x86-64-v3 -mtune=generic
KFLAGS_avxvnni_amd64 := -march=x86-64-v3 -mavxvnni -mtune=generic
KFLAGS_avx512_amd64  := -march=x86-64-v4 -mavx512vnni -mtune=generic
KFLAGS_generic_arm64 := -march=armv8-a
KFLAGS_neon_arm64    := -march=armv8.2-a+dotprod+fp16
KLIBS := $(foreach l,$(KLEVELS_$(GOARCH)),$(KDIR)/lib/libdovetail-$(l)-$(GOARCH).so)

kernels: $(KLIBS)

$(KDIR)/lib/libdovetail-%-$(GOARCH).so: $(KSRC) $(KHDR) Makefile
	@if command -v $(CC) >/dev/null 2>&1; then \
		echo "$(CC) $* -> $@"; \
		$(CC) $(KCFLAGS) $(KFLAGS_$*_$(GOARCH)) -o $@ $(KSRC) -lm; \
	else \
		echo "warning: $(CC) not found: $@ not built, the kernels run in pure Go"; \
	fi

# PTX of the CUDA device's kernels (device/cuda/kernels.cu, and quant.cu for
# matrices in their GGUF blocks, with blocks.h), embedded by
# the cuda package and JIT-compiled by the driver for the GPU at hand. It needs
# nvcc, so the PTX is committed: building Dovetail needs no CUDA toolkit.
# compute_75 (Turing, GTX 16xx / RTX 20xx) is the oldest that CUDA 13's nvcc
# still targets. nvcc labels its PTX with its own ISA version (9.0 for CUDA
# 13), which drivers older than it refuse; the kernels use only
# instructions of PTX 7.0 (CUDA 11, drivers from R450), so the label is
# lowered to that. The driver checks each instruction against the label:
# a kernel that needed more would fail to load in the CUDA tests, and
# ptxas (with nvcc: Debian's nvidia-cuda-toolkit, in non-free) checks the
# labelled PTX here for the oldest and the newest cards.
NVCC    ?= nvcc
PTXAS   ?= ptxas
PTXVER  := 7.0
ptx: device/cuda/kernels.ptx device/cuda/quant.ptx

device/cuda/quant.ptx: device/cuda/blocks.h device/cuda/reduce.h
device/cuda/kernels.ptx: device/cuda/reduce.h

device/cuda/%.ptx: device/cuda/%.cu
	$(NVCC) -ptx -arch=compute_75 -o $@.tmp $<
	sed 's/^\.version [0-9.]*$$/.version $(PTXVER)/' $@.tmp > $@ && rm $@.tmp
	$(PTXAS) -arch=sm_75 -o /dev/null $@
	$(PTXAS) -arch=sm_90 -o /dev/null $@

build: kernels
	$(GO) build -o $(BIN)/dovetail ./app/dovetail

# The desktop app (fyne: cgo, and the X11 and OpenGL headers, see the README's
# prerequisites). Without animations: fyne's fading text cursor repaints the
# whole window every frame while the message box has focus, on the CPUs the
# model runs on when no GPU draws (docs/measurements/desktop.md, "The desktop
# app").
DESKTOP_TAGS := no_animations
desktop: kernels
	$(GO) build -tags $(DESKTOP_TAGS) -o $(BIN)/dovetail-desktop ./app/dovetail-desktop

# docs/screenshots: the desktop app's tour in a real window on a virtual X
# server (xvfb-run, xwd), from a fresh home: the embedded model, no
# settings of the user's.
TOURHOME = $(abspath $(BIN))/tour-home
screenshots: desktop
	rm -rf $(TOURHOME) && mkdir -p $(TOURHOME)
	HOME=$(TOURHOME) XDG_CONFIG_HOME=$(TOURHOME)/config XDG_DATA_HOME=$(TOURHOME)/data \
	XDG_CACHE_HOME=$(TOURHOME)/cache FYNE_SCALE=1 \
	xvfb-run -a -s "-screen 0 1280x900x24" $(BIN)/dovetail-desktop --screenshots docs/screenshots

run: build
	$(BIN)/dovetail run -p "$(PROMPT)" -n 200

# The adaptation loop swaps draft weights under a decoding goroutine, the
# runner's slots draft side by side, and the desktop app loads and
# generates off its UI goroutine: their tests also run under the race
# detector (needs cgo, which the kernels' C compiler provides).
test: kernels
	$(GO) test ./...
	CGO_ENABLED=1 $(GO) test -race -run 'Adapt|Live|Learner|Records|TextMemory|Drafter' ./engine/... ./dgf ./train ./app/runner
	CGO_ENABLED=1 $(GO) test -race ./app/desktop

bench: kernels
	$(GO) test -run '^$$' -bench . -benchtime 1s ./quant/ ./cpu/ ./cpu/kernels/

fuzz:
	cd models/gguf && $(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean:
	rm -rf $(BIN) $(KDIR)/lib/*.so
	$(GO) clean -testcache
