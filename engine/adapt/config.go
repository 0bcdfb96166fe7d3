package adapt

import (
	"dovetail/models/draft"
)

// Config are the adaptation loop's settings.
type Config struct {
	Mode        Mode
	RecordBytes int     // bound of the record ring
	Window      int     // positions per training window
	Batch       int     // windows per optimizer step
	Steps       int     // optimizer steps per training run
	HeldOut     int     // held-out windows (the newest records) per evaluation
	MinGain     float64 // simulated τ the shadow must gain over the kept version
	// Duty is the share of wall time the trainer computes while a request
	// is decoding: after a step of s seconds it sleeps s·(1−Duty)/Duty.
	// 1 never waits (a GPU, or a spare core); on a host whose cores all
	// decode, less keeps decoding fast.
	Duty float64
	// IdleThread runs the trainer on an OS thread of idle priority (Linux
	// SCHED_IDLE), where it computes only on cores the decoder leaves
	// idle: for a trainer on the CPU (with one thread: a host device's
	// extra workers run at normal priority). Decoding then keeps its
	// speed, and the trainer learns only in the decoder's gaps
	// (docs/measurements/adaptation.md, "A trainer on the CPU at idle
	// priority").
	IdleThread bool
	// RequestWindow is the most positions of its own text a per-request
	// step trains on.
	RequestWindow int
	// Branches is the share of each step's windows that end in a node
	// the target rejected (Aurora; 0: rejected nodes are not kept), and
	// BranchBytes bounds the rejected nodes kept.
	Branches    float64
	BranchBytes int
	// MemoryTokens bounds the text memory (TextMemory): the verified text
	// of finished requests, whose continuations are grafted onto every
	// draft tree. 0: none.
	MemoryTokens int
	Control      Control
	Seed         uint64
}

// DefaultConfig are the settings chosen with `dovetail bench adapt` on both
// test models (docs/measurements/adaptation.md, "Online adaptation" and "The
// defaults of adaptation"): short windows and short training runs publishing
// on a small simulated τ gain over requests held out whole (windows of the
// requests trained on let overfit drafts in); duty 1 (a lower duty saved
// nothing of decode speed); rejected branches off (their gain stayed inside
// the noise); and a text memory of 256K tokens, which does most of
// adaptation's work where text recurs.
func DefaultConfig() Config {
	return Config{Mode: Background, RecordBytes: 16 << 20, Window: 32, Batch: 8, Steps: 24, HeldOut: 8,
		MinGain: 0.02, Duty: 1, RequestWindow: 64, BranchBytes: 16 << 20, MemoryTokens: 1 << 18,
		Control: *DefaultControl(), Seed: 1}
}

// HostBytes is what adaptation by c holds in host memory besides the
// draft: the record ring, the rejected branches and the text memory.
func (c Config) HostBytes() uint64 {
	b := uint64(max(c.RecordBytes, 0)) + TextMemoryBytes(c.MemoryTokens)
	if c.Branches > 0 {
		b += uint64(max(c.BranchBytes, 0))
	}
	return b
}

// Stats is what the adapter has done so far.
type Stats struct {
	Mode              string
	Version           int // the kept version
	Collecting        bool
	Training          bool // a training run is under way
	Paused            bool // SetPaused: records are kept, nothing trains
	Records           int  // positions held
	Branches          int  // rejected nodes held
	Remembered        int  // tokens in the text memory
	Runs, Published   int
	ShortTau, LongTau float64     // EMAs of measured τ
	Shadow, Kept      draft.Score // the last comparison's
	TauHistory        []float64   // measured τ (short EMA) at each publication
}
