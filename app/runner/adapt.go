package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"dovetail/app/runner/store"
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/engine/adapt"
	"dovetail/engine/drafters"
	"dovetail/models/draft"
	"dovetail/train"
)

// greedyTargetSharpness sharpens the target's distribution that a draft
// adapting for greedy decoding learns (train.TrainConfig.TargetSharpness):
// greedy verification accepts the target's argmax, so a sharper target
// teaches what is accepted (docs/measurements/adaptation.md, "A sharpened
// target for greedy adaptation").
const greedyTargetSharpness = 2

// greedySharpness ranks a DGF draft's tree more sharply for greedy decoding
// (drafters.DGF.Sharpness; docs/measurements/speculation.md, "A DGF draft
// ranking its tree for greedy decoding").
const greedySharpness = 2

// adaptive is a DGF draft that adapts online while it drafts: its live
// versions, the learner training a shadow copy on a device of its own, the
// adaptation loop, and the files the adapted draft and the text memory are
// saved to.
type adaptive struct {
	live     *dgf.Live
	learner  *train.Learner
	adapter  *adapt.Adapter
	seqs     []*dgf.Sequence
	drafters []*adapt.Drafter
	mode     adapt.Mode

	store                     *store.Store
	fp, targetName, startedAs string
	save                      bool // write the adapted draft and memory
	saveEvery                 time.Duration
	savedVer                  int
	lastSave                  time.Time
	notify                    func(Notice)
	memoryFile                string // where the text memory is read from and saved ("": neither)
	memoryBad                 bool   // the saved text memory did not load: set it aside before saving
	memorySaved               int64  // TextMemory.Appended when last saved
	saveMu                    sync.Mutex
	stopSaver, saverDone      chan struct{}
	releaseDevices            func() // closes the devices the draft and its trainer run on (nil: none)
}

// errStopped is a background start that its runner's close stopped.
var errStopped = errors.New("stopped")

// startAdaptive runs d, loaded from ck (nil: a new, untrained draft — day
// 0), adapting as a says on trainDev, with a sequence for each of slots;
// it owns d from now on. where names the draft's origin. Between its
// long steps it gives up with errStopped once stopped (nil: never) says so.
func startAdaptive(stopped func() bool, d *dgf.Draft, ck *draft.Checkpoint, where string, m *Model, trainDev device.Device, ctx, slots int,
	greedy bool, a Adapt, st *store.Store, notify func(Notice)) (*adaptive, error) {
	if stopped == nil {
		stopped = func() bool { return false }
	}
	version := 0
	var history []float64
	var err error
	if ck == nil {
		// Drawn straight into its drafting form: a 7B target's new draft
		// would otherwise write float32 matrices it drops at once. A
		// runner closing meanwhile stops it between chunks.
		err = d.DayZeroForDraftingUnless(1, stopped)
		where = "untrained"
	} else {
		version, _ = strconv.Atoi(ck.Meta[store.MetaVersion])
		history = store.ParseFloats(ck.Meta[store.MetaTauHistory])
		err = d.FreezeForDraftingUnless(stopped)
	}
	if err != nil {
		d.Free()
		if errors.Is(err, dgf.ErrStopped) {
			return nil, errStopped
		}
		return nil, fmt.Errorf("draft %s: %w", where, err)
	}
	ad := &adaptive{live: dgf.NewLive(d, version), mode: a.Mode, fp: m.Fingerprint, targetName: m.Name, notify: notify,
		store: st, save: a.Save && st != nil, saveEvery: a.SaveEvery, savedVer: version, lastSave: time.Now(), startedAs: where}
	if ck != nil && ck.Meta[store.MetaStartedAs] != "" {
		ad.startedAs = ck.Meta[store.MetaStartedAs]
	}
	// The saved text memory is read whether or not this run saves.
	if st != nil && a.Recall {
		ad.memoryFile = st.MemoryPath(m.Fingerprint)
	}
	c := a.Engine
	c.Mode = a.Mode
	c.IdleThread = a.Idle && device.OnHost(trainDev)
	if c.Mode == adapt.Off {
		// Only the text memory learns (an EAGLE-3 draft): no records of
		// features are kept, so none are held.
		c.RecordBytes, c.Branches = 2*adapt.RecordBytes(d.C.Hidden), 0
	}
	if stopped() {
		ad.live.Close()
		return nil, errStopped
	}
	// Drafting reads only the Q8_0 copies of the large matrices: their
	// float32 values go before the learner allocates its own, whose
	// shadow starts from the Q8_0 values (the live draft drafts with
	// exactly those), so the freed memory serves the learner.
	ad.live.DropFloat()
	runtime.GC()
	// The learner sets its shadow and trainer up when the first training
	// run starts: a session may never have enough text for one.
	ad.learner = train.NewLearner(ad.live, trainDev, trainConfig(a, greedy), learnRows(c), learnLen(c), learnDepth)
	if ad.adapter, err = adapt.NewAdapter(ad.learner, d.C.Hidden, c, ad.published); err != nil {
		ad.learner.Free()
		ad.live.Close()
		return nil, err
	}
	ad.adapter.SetTauHistory(history)
	ad.loadMemory(m.Config().Vocab)
	for range slots {
		ad.newDrafter(ctx, greedy)
	}
	ad.adapter.Start()
	if ad.save && ad.memoryFile != "" && ad.saveEvery > 0 && ad.adapter.Memory() != nil {
		ad.stopSaver, ad.saverDone = make(chan struct{}), make(chan struct{})
		go ad.saveMemoryEvery()
	}
	return ad, nil
}

// learnDepth is the chain of draft steps a learner scores.
const learnDepth = 4

// learnRows and learnLen shape the trainer's batches for c.
func learnRows(c adapt.Config) int { return max(c.Batch*c.Window, c.RequestWindow) }
func learnLen(c adapt.Config) int  { return max(c.Window, c.RequestWindow) }

// trainConfig is the trainer's recipe for a.
func trainConfig(a Adapt, greedy bool) train.TrainConfig {
	tc := train.DefaultTrainConfig()
	tc.LR, tc.Warmup, tc.ProbWeight, tc.Unroll, tc.AnchorWeight = a.LR, 0, 1, a.Unroll, a.Anchor
	if a.Mode != adapt.PerRequest {
		tc.AnchorWeight = 0
	}
	if greedy {
		tc.TargetSharpness = greedyTargetSharpness
	}
	return tc
}

// saveMemoryEvery saves the text memory every saveEvery while it grows:
// it grows with every request, published drafts or not.
func (a *adaptive) saveMemoryEvery() {
	defer close(a.saverDone)
	tick := time.NewTicker(a.saveEvery)
	defer tick.Stop()
	for {
		select {
		case <-a.stopSaver:
			return
		case <-tick.C:
			if err := a.saveMemory(); err != nil {
				a.notify(Notice{Warning: true, Text: err.Error()})
			}
		}
	}
}

// newDrafter is a drafter of one more sequence (a slot) of the live draft,
// feeding the same adaptation.
func (a *adaptive) newDrafter(ctx int, greedy bool) *adapt.Drafter {
	seq := a.live.NewSequence(ctx)
	seq.KeepCache = a.mode == adapt.PerRequest
	a.seqs = append(a.seqs, seq)
	dd := drafters.NewDGF(seq)
	if greedy {
		dd.Sharpness = greedySharpness
	}
	ad := a.adapter.Drafter(dd)
	a.drafters = append(a.drafters, ad)
	return ad
}

// published saves the draft now and then, on the trainer's goroutine.
func (a *adaptive) published(int) {
	if a.saveEvery > 0 && time.Since(a.lastSave) >= a.saveEvery {
		if err := a.saveDraft(); err != nil {
			a.notify(Notice{Warning: true, Text: err.Error()})
		}
	}
}

// loadMemory fills the text memory with the one saved for the target, if
// any. One that does not load is set aside (never overwritten), with a
// notice; where it cannot be, it is tried again at the next save.
func (a *adaptive) loadMemory(vocab int) {
	m := a.adapter.Memory()
	if m == nil || a.memoryFile == "" {
		return
	}
	data, err := os.ReadFile(a.memoryFile)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		_, err = m.Load(data, vocab)
	}
	if err != nil {
		text := fmt.Sprintf("ignoring the saved text memory %s, which does not load (%v)", a.memoryFile, err)
		switch aside, serr := setAsideUnlessDenied(a.store, a.memoryFile, err); {
		case serr != nil:
			text += ": " + serr.Error()
			a.memoryBad = true
		case aside != "":
			text += ": moved it to " + aside
		}
		a.notify(Notice{Warning: true, Text: text})
		return
	}
	a.memorySaved = m.Appended()
}

// saveMemory writes the text memory atomically (it holds the user's text:
// 0600), unless it is already saved. Only a run that read the saved memory
// writes it: one that did not would drop what that held.
func (a *adaptive) saveMemory() error {
	m := a.adapter.Memory()
	if m == nil || !a.save || a.memoryFile == "" {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	n := m.Appended()
	if n == a.memorySaved {
		return nil
	}
	p := a.memoryFile
	if a.memoryBad {
		aside, err := a.store.SetAside(p)
		if err != nil {
			return fmt.Errorf("text memory not saved: %w", err)
		}
		if aside != "" {
			a.notify(Notice{Warning: true, Text: fmt.Sprintf("moved the unreadable %s to %s", p, aside)})
		}
		a.memoryBad = false
	}
	err := a.store.WriteFile(p, true, func(w io.Writer) error { _, err := w.Write(m.Marshal(a.targetName)); return err })
	if err != nil {
		return fmt.Errorf("text memory not saved: %w", err)
	}
	a.memorySaved = n
	return nil
}

// saveDraft writes the kept version, atomically, unless it is already
// saved. A file there that does not load is moved aside first, not
// overwritten.
func (a *adaptive) saveDraft() error {
	v := a.learner.Version()
	if !a.save || v == a.savedVer {
		return nil
	}
	path := a.store.DraftPath(a.fp)
	if _, err := draft.Check(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		aside, err := a.store.SetAside(path)
		if err != nil {
			return fmt.Errorf("adapted draft not saved: %w", err)
		}
		if aside != "" {
			a.notify(Notice{Warning: true, Text: fmt.Sprintf("moved the unreadable %s to %s", path, aside)})
		}
	}
	ck, err := a.learner.Checkpoint(a.fp, a.targetName)
	if err != nil {
		return fmt.Errorf("adapted draft not saved: %w", err)
	}
	st := a.adapter.Stats()
	ck.Meta[store.MetaVersion] = strconv.Itoa(v)
	ck.Meta[store.MetaTauHistory] = store.FormatFloats(st.TauHistory)
	ck.Meta[store.MetaSavedAt] = time.Now().UTC().Format(time.RFC3339)
	ck.Meta[store.MetaStartedAs] = a.startedAs
	if err := a.store.MakeDir(a.store.DraftsDir(), true); err != nil {
		return fmt.Errorf("adapted draft not saved: %w", err)
	}
	// The version it replaces stays restorable (Store.Restore).
	if err := os.Rename(path, a.store.PrevPath(a.fp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("adapted draft not saved: keeping the previous one: %w", err)
	}
	if err := ck.WriteFile(path); err != nil {
		return fmt.Errorf("adapted draft not saved: %w", err)
	}
	a.savedVer, a.lastSave = v, time.Now()
	return nil
}

// clearMemory forgets the remembered text, here and on disk.
func (a *adaptive) clearMemory() error {
	m := a.adapter.Memory()
	if m == nil {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	m.Reset()
	a.memorySaved = m.Appended()
	if a.memoryFile != "" {
		if err := os.Remove(a.memoryFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// close stops adaptation, saves the adapted draft (the last version
// published) and the text memory, and frees everything. It waits for the
// trainer at most adapt.StopWait: one that has not returned by then (an
// idle-priority thread on a busy machine) saves the draft and frees its
// learner and the live draft when it does, since until then the learner
// is the trainer's (it may be setting its drafts up).
func (a *adaptive) close() error {
	// A sequence's text joins the memory when it ends.
	for _, d := range a.drafters {
		d.Finish()
	}
	if a.stopSaver != nil {
		close(a.stopSaver)
		<-a.saverDone
	}
	err := a.adapter.Close()
	stopped := false
	select {
	case <-a.adapter.Stopped():
		stopped = true
		if serr := a.saveDraft(); err == nil {
			err = serr
		}
	default:
	}
	if serr := a.saveMemory(); err == nil {
		err = serr
	}
	for _, s := range a.seqs {
		s.Free()
	}
	free := func() {
		a.learner.Free()
		a.live.Close()
		if a.releaseDevices != nil {
			a.releaseDevices()
		}
	}
	if stopped {
		free()
		return err
	}
	// The trainer has not returned yet (an idle-priority thread on a busy
	// machine, or a trainer still setting up): the learner is still its,
	// so the draft is saved when it returns, then freed.
	a.notify(Notice{Text: "the draft's trainer is still stopping: the adapted draft is saved once it has"})
	go func() {
		<-a.adapter.Stopped()
		if err := a.saveDraft(); err != nil {
			a.notify(Notice{Warning: true, Text: err.Error()})
		}
		free()
	}()
	return err
}
