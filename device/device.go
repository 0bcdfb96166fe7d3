// Package gpu runs the Dovetail draft model on a device: the Device
// interface, its host implementation (the same maths on the CPU, used when
// there is no GPU and in tests), the draft's forward and hand-written
// backward passes, the AdamW optimizer and the draft sequence that drafts
// for the engine.
//
// Model code talks to a Device only: buffers are opaque handles, and every
// computation is one of the Device's operations, so that a CUDA device has
// to implement the same interface and nothing else. Operations come in
// forward/backward pairs in the llm.c manner: outputs first, shapes in the
// comments, backward functions accumulate (+=) into gradient buffers.
package device

import (
	"fmt"

	"dovetail/internal/topk"
	"dovetail/models"
)

// Buffer is device memory holding float values (float32 on a GPU; the
// host device used by gradient checks holds float64). Only the Device that
// allocated it may use it.
type Buffer interface {
	// Len is the number of values.
	Len() int
}

// Matrix is a frozen weight matrix on the device, kept in its stored
// format (f32, f16, Q8_0, ...): the target's embeddings and LM head, which
// the draft shares and never trains.
type Matrix interface {
	Rows() int
	Cols() int
}

// Attn is the shape of one attention call. The keys (and values) are Past
// committed positions followed by Pend pending ones; the queries are the
// last Rows of the pending positions. Query row j (pending index
// Pend−Rows+j) attends to every committed key and to pending key i when
// Mask[j*Pend+i] != 0; a nil Mask is causal (pending keys up to its own).
type Attn struct {
	Heads, KVHeads, HeadDim int
	Past, Pend, Rows        int
	Mask                    []uint8
}

// Keys is the number of key positions.
func (a Attn) Keys() int { return a.Past + a.Pend }

// Check panics, naming op, when a is not a shape an attention call takes:
// a bug in its caller.
func (a Attn) Check(op string) {
	if a.Heads < 1 || a.KVHeads < 1 || a.Heads%a.KVHeads != 0 || a.HeadDim < 1 ||
		a.Past < 0 || a.Rows < 1 || a.Pend < a.Rows || (a.Mask != nil && len(a.Mask) < a.Rows*a.Pend) {
		panic(fmt.Sprintf("device: %s: bad shape %+v", op, a))
	}
}

// AdamW holds the optimizer's hyper-parameters for one update. GradScale
// multiplies every gradient first (gradient clipping).
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int // 1 for the first update
	GradScale                          float32
}

// Device is where the draft runs. Shapes are given in values; matrices are
// row-major, rows × cols.
type Device interface {
	// Name says what the device is.
	Name() string
	// MemInfo is the device's memory in bytes: free (what new buffers can
	// still get: on the host, the memory available to the process) and
	// total.
	MemInfo() (free, total uint64)
	// Close gives back what the device holds of its own (a stream, pinned
	// memory, library handles). Buffers and matrices are freed first; the
	// device is not used afterwards.
	Close()

	// Alloc returns a zeroed buffer of n values.
	Alloc(n int) Buffer
	// Free releases a buffer (views of it become invalid).
	Free(b Buffer)
	// View is values [off, off+n) of b, sharing its memory.
	View(b Buffer, off, n int) Buffer
	// Upload copies src into the first len(src) values of dst.
	Upload(dst Buffer, src []float32)
	// Download copies the first len(dst) values of src into dst.
	Download(dst []float32, src Buffer)
	// Zero sets every value of b to 0.
	Zero(b Buffer)
	// Copy copies src into dst (same length).
	Copy(dst, src Buffer)
	// UploadMatrix makes a frozen matrix of t in its stored format.
	UploadMatrix(t *models.Tensor) (Matrix, error)

	// Embed gathers rows: out[n×C] = dequantized rows tokens[i] of table.
	Embed(out Buffer, table Matrix, tokens []int)

	// MatMul: out[n×o] = x[n×in] · w[o×in]ᵀ.
	MatMul(out, x, w Buffer, n, in, o int)
	// MatMulBackward: dx[n×in] += dout[n×o] · w[o×in]; dw[o×in] += doutᵀ · x.
	// Either of dx and dw may be nil.
	MatMulBackward(dx, dw, dout, x, w Buffer, n, in, o int)
	// MatMulFrozen: out[n×R] = x[n×C] · Wᵀ for a frozen W of R×C.
	MatMulFrozen(out, x Buffer, w Matrix, n int)
	// MatMulFrozenBackward: dx[n×C] += dout[n×R] · W.
	MatMulFrozenBackward(dx, dout Buffer, w Matrix, n int)

	// RMSNorm: out[n×c] = x / sqrt(mean(x²) + eps) ⊙ w[c].
	RMSNorm(out, x, w Buffer, n, c int, eps float32)
	// RMSNormBackward: dx[n×c] += ∂/∂x, dw[c] += ∂/∂w (dx may be nil).
	RMSNormBackward(dx, dw, dout, x, w Buffer, n, c int, eps float32)

	// SiLU: out = x·σ(x), elementwise.
	SiLU(out, x Buffer)
	// SiLUBackward: dx += dout · σ(x)(1 + x(1−σ(x))).
	SiLUBackward(dx, dout, x Buffer)
	// SwiGLU: out = SiLU(gate) ⊙ up.
	SwiGLU(out, gate, up Buffer)
	// SwiGLUBackward: dgate += ∂/∂gate, dup += ∂/∂up.
	SwiGLUBackward(dgate, dup, dout, gate, up Buffer)
	// Add: out = a + b (out may be a or b).
	Add(out, a, b Buffer)

	// Concat: out[n×(ca+cb)] = [a[n×ca] ‖ b[n×cb]].
	Concat(out, a, b Buffer, n, ca, cb int)
	// ConcatBackward: da += dout[:, :ca], db += dout[:, ca:].
	ConcatBackward(da, db, dout Buffer, n, ca, cb int)
	// Gate is the DGF mix: z = σ(zpre); out = z⊙h1 + (1−z)⊙h2.
	Gate(out, zpre, h1, h2 Buffer)
	// GateBackward: dzpre, dh1, dh2 += their gradients.
	GateBackward(dzpre, dh1, dh2, dout, zpre, h1, h2 Buffer)

	// RoPE rotates, in place, each adjacent pair (2i, 2i+1) of every head of
	// x[n × heads·hd] by pos[r] · theta^(−2i/hd) (llama.cpp's layout).
	RoPE(x Buffer, pos []int, heads, hd int, theta float32)
	// RoPEBackward turns, in place, the gradient of a rotated x into the
	// gradient of x before rotation (the inverse rotation).
	RoPEBackward(dx Buffer, pos []int, heads, hd int, theta float32)

	// Attention: out[Rows × Heads·HeadDim] = softmax(q·kᵀ/√HeadDim, masked)·v
	// for q[Rows × Heads·HeadDim], k, v[Keys × KVHeads·HeadDim]; query head h
	// reads KV head h/(Heads/KVHeads). probs[Rows × Heads × Keys] receives the
	// attention weights (0 where masked), which the backward pass reads.
	Attention(out, probs, q, k, v Buffer, a Attn)
	// AttentionBackward: dq, dk, dv += their gradients.
	AttentionBackward(dq, dk, dv, dout, probs, q, k, v Buffer, a Attn)

	// SmoothL1: loss[n] = mean over c of SmoothL1(pred − target) (β = 1);
	// dpred[n×c] += scale · ∂loss/∂pred (dpred may be nil).
	SmoothL1(dpred, loss, pred, target Buffer, n, c int, scale float32)
	// SoftCrossEntropy: with p = softmax(target) and q = softmax(logits)
	// row by row, loss[n] = −Σ p log q, agree[n] = 1 where both argmaxes
	// are the same token (else 0), and dlogits[n×v] += scale · (q − p).
	// dlogits and agree may be nil.
	SoftCrossEntropy(dlogits, loss, agree, logits, target Buffer, n, v int, scale float32)

	// TopK ranks each row r < n of logits[n×v] for a draft tree: the
	// tokens of the k largest values of scale·logits (k ≤ v) go to
	// top[r·k …], largest first (ties: the lower index first), with their
	// log-probabilities under softmax(scale·logits). Only these reach the
	// host.
	TopK(top []topk.Choice, logits Buffer, n, v, k int, scale float32)

	// Sum is Σ b, summed in float64 (losses and agreement counts).
	Sum(b Buffer) float64
	// SumSquares is Σ b², summed in float64 (for the gradient norm).
	SumSquares(b Buffer) float64
	// AdamWUpdate updates param[i] with grad[i] and the moments m, v.
	// decay says whether weight decay applies (matrices, not norms).
	AdamWUpdate(param, grad, m, v Buffer, p AdamW, decay bool)
}

// Error is a failure of the device itself — out of memory, a GPU lost —
// with which an operation, having no error to return, panics. The
// functions that set models up on a device (dgf.NewDraft, train.NewTrainer,
// offload.NewLayers, ...) return it as their error instead, through Catch;
// what they had allocated before it is not given back.
type Error struct{ Err error }

func (e *Error) Error() string { return "gpu: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// FreqRoPE is a Device whose RoPE also scales each pair's frequency (Llama
// 3's long-context factors, GGUF's rope_freqs): pair j of position p turns
// by p·θ^(−2j/hd)/freqs[j]. The host device has it; a model that needs it
// runs where it is.
type FreqRoPE interface {
	RoPEFreqs(x Buffer, pos []int, heads, hd int, theta float32, freqs []float32)
	RoPEFreqsBackward(dx Buffer, pos []int, heads, hd int, theta float32, freqs []float32)
}

// Catch turns an Error panic into *err; other panics (bugs) go on. Defer
// it in functions that return errors and run device operations.
func Catch(err *error) {
	if r := recover(); r != nil {
		de, ok := r.(*Error)
		if !ok {
			panic(r)
		}
		*err = de
	}
}
