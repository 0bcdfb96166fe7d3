package distill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"dovetail/dgf"
	"dovetail/models/draft"
	"dovetail/train"
)

// evaluate runs the held-out windows in batches and averages by position.
func evaluate(tr *train.Trainer, ws []draft.Window, batch int) (train.Metrics, error) {
	var sum train.Metrics
	for lo := 0; lo < len(ws); {
		hi, n := lo, 0
		for hi < len(ws) && n+len(ws[hi].Tokens)-1 <= batch {
			n += len(ws[hi].Tokens) - 1
			hi++
		}
		m, err := tr.Eval(ws[lo:hi])
		if err != nil {
			return sum, err
		}
		w := float64(m.Positions)
		sum.Loss += w * m.Loss
		sum.FeatLoss += w * m.FeatLoss
		sum.ProbLoss += w * m.ProbLoss
		if sum.Top1 == nil {
			sum.Top1 = make([]float64, len(m.Top1))
		}
		for i, v := range m.Top1 {
			sum.Top1[i] += w * v
		}
		sum.Positions += m.Positions
		lo = hi
	}
	n := float64(max(1, sum.Positions))
	sum.Loss, sum.FeatLoss, sum.ProbLoss = sum.Loss/n, sum.FeatLoss/n, sum.ProbLoss/n
	for i := range sum.Top1 {
		sum.Top1[i] /= n
	}
	return sum, nil
}

// runState is where training stands: what a resume checkpoint records.
type runState struct {
	step      int // optimizer steps done
	epoch     int
	consumed  int // windows of this epoch already trained on
	positions int // positions trained on in all
	evalMeta  map[string]string
}

func (s *runState) save(ck *draft.Checkpoint) {
	ck.Meta["resume.epoch"] = strconv.Itoa(s.epoch)
	ck.Meta["resume.consumed"] = strconv.Itoa(s.consumed)
	ck.Meta["resume.positions"] = strconv.Itoa(s.positions)
}

func (s *runState) resume(ck *draft.Checkpoint, d *dgf.Draft, fp, name, settings string) error {
	if err := ck.CheckTarget(fp, name); err != nil {
		return fmt.Errorf("resume checkpoint: %w (use --fresh to start over)", err)
	}
	if ck.Meta["settings"] != settings {
		return fmt.Errorf("%w: a resume checkpoint made with other settings exists (%s); run with those, or --fresh to start over", ErrUsage, ck.Meta["settings"])
	}
	if err := d.Load(ck); err != nil {
		return err
	}
	var err error
	for _, kv := range []struct {
		k string
		v *int
	}{{"step", &s.step}, {"resume.epoch", &s.epoch}, {"resume.consumed", &s.consumed}, {"resume.positions", &s.positions}} {
		if *kv.v, err = strconv.Atoi(ck.Meta[kv.k]); err != nil {
			return fmt.Errorf("resume checkpoint: metadata %s: %v (use --fresh to start over)", kv.k, err)
		}
	}
	return nil
}

// train runs optimizer steps until total, streaming windows with the
// target's features from a producer goroutine. It returns
// context.Canceled when interrupted (at a step boundary).
func (s *runState) train(ctx context.Context, r *run, tr *train.Trainer, data *corpusData, total int, save func(bool) error) error {
	f, target := r.o, r.target
	bar := Progress{Phase: "train", Total: total, Done: s.step}
	var emaLoss, emaTop1 float64
	var trainTime time.Duration
	trained := 0
	lastSave := time.Now()
	for s.step < total {
		order := data.order(s.epoch, uint64(f.Seed))
		wins := make(chan draft.Window, 32)
		pctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			errc <- data.produce(pctx, target, order, f.SeqLen, s.consumed, wins)
			close(wins)
		}()
		var batch []draft.Window
		n := 0
		step := func() error {
			t0 := time.Now()
			m, err := tr.Step(batch)
			if err != nil {
				return err
			}
			trainTime += time.Since(t0)
			trained += m.Positions
			s.step++
			s.consumed += len(batch)
			s.positions += m.Positions
			if emaLoss == 0 {
				emaLoss, emaTop1 = m.Loss, m.Top1[0]
			}
			emaLoss, emaTop1 = 0.9*emaLoss+0.1*m.Loss, 0.9*emaTop1+0.1*m.Top1[0]
			bar.Done = s.step
			bar.Info = fmt.Sprintf("loss %.4f  top-1 %.1f%%  %.0f pos/s", emaLoss, 100*emaTop1,
				float64(trained)/max(1e-9, trainTime.Seconds()))
			r.progress(bar)
			batch, n = batch[:0], 0
			if f.StopAfter > 0 && s.step >= f.StopAfter && s.step < total {
				return context.Canceled
			}
			if time.Since(lastSave) > f.SaveEvery && s.step < total {
				lastSave = time.Now()
				return save(false)
			}
			return nil
		}
		var err error
		for w := range wins {
			T := len(w.Tokens) - 1
			if n+T > f.Batch {
				if err = step(); err != nil || s.step >= total {
					break
				}
			}
			if err = ctx.Err(); err != nil {
				break
			}
			batch = append(batch, w)
			n += T
		}
		if err == nil && len(batch) > 0 && s.step < total && ctx.Err() == nil {
			err = step()
		}
		cancel()
		for range wins {
		}
		if perr := <-errc; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
			err = perr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			bar.Finished = true
			r.progress(bar)
			return err
		}
		if s.step < total {
			s.epoch, s.consumed = s.epoch+1, 0
		}
	}
	bar.Finished = true
	r.progress(bar)
	r.info("trained %d positions in %s: %.0f positions/s in training steps",
		trained, trainTime.Round(time.Millisecond), float64(trained)/max(1e-9, trainTime.Seconds()))
	return nil
}

func fmtTop1(t []float64) string {
	s := make([]string, len(t))
	for i, v := range t {
		s[i] = fmt.Sprintf("%.1f%%", 100*v)
	}
	if len(s) > 1 {
		return strings.Join(s, " / ") + " (draft steps 1.." + strconv.Itoa(len(s)) + ")"
	}
	return s[0]
}
