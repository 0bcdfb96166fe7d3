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
}

// startDrawPump runs draw on the UI's goroutine after each poke until
// close.
func startDrawPump(draw func()) *drawPump {
	p := &drawPump{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case <-p.stop:
				return
			case <-p.wake:
				fyne.DoAndWait(draw)
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

// close ends the pump; a draw under way finishes.
func (p *drawPump) close() { close(p.stop) }
