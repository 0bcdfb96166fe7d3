package desktop

import "fyne.io/fyne/v2"

// drawPump draws a streaming reply on the UI's goroutine for the
// generation, which only pokes it: fyne.Do hands its function over on an
// unbuffered channel, and a generation calling it waited there for fyne's
// goroutines to be scheduled, on the two cores its own threads decode on
// (docs/measurements/desktop.md, "The chat's speed in a real window").
// A poke never blocks; pokes that come while a draw is under way make
// one more draw.
type drawPump struct {
	wake chan struct{}
	stop chan struct{}
	done chan struct{} // closed when the pump's goroutine has returned
}

// startDrawPump runs draw on the UI's goroutine after each poke until
// close.
func startDrawPump(draw func()) *drawPump {
	p := &drawPump{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-p.wake:
				// Do, not DoAndWait: a window closing waits on the UI
				// goroutine for the generation, which waits in close for
				// this goroutine. fyne's queue keeps the order, and the
				// chat asks for one draw at a time (chatView.scheduled).
				fyne.Do(draw)
			}
		}
	}()
	return p
}

// poke asks for a draw, without waiting.
func (p *drawPump) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close ends the pump once it has handed over its last draw: the reply's
// last draw comes after every draw of the pump (fyne's queue keeps their
// order; under fyne's test driver a draw runs on the goroutine that asks
// for it, and two would overlap).
func (p *drawPump) close() {
	close(p.stop)
	<-p.done
}
