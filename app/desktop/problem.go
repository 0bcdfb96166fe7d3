package desktop

import (
	"errors"
	"io/fs"
	"net"
	"strings"
	"syscall"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// problemBox says what went wrong and what to do in words; the error as
// the program had it waits behind a "Details" expander, for a bug report.
type problemBox struct {
	content *fyne.Container
	line    *widget.Label
	raw     *widget.Label
	details *widget.Accordion
}

func newProblemBox() *problemBox {
	p := &problemBox{line: widget.NewLabel(""), raw: widget.NewLabel("")}
	p.line.Importance = widget.DangerImportance
	p.line.Wrapping = fyne.TextWrapWord
	p.raw.Wrapping = fyne.TextWrapWord
	p.raw.TextStyle.Monospace = true
	p.details = widget.NewAccordion(widget.NewAccordionItem("Details", p.raw))
	p.content = container.NewVBox(p.line, p.details)
	p.content.Hide()
	return p
}

// show says words, with err's own text under Details (none without err).
func (p *problemBox) show(words string, err error) {
	p.line.SetText(sentenceCase(words))
	p.details.CloseAll()
	if err != nil && err.Error() != words {
		p.raw.SetText(err.Error())
		p.details.Show()
	} else {
		p.details.Hide()
	}
	p.content.Show()
}

func (p *problemBox) hide() { p.content.Hide() }

// Text is what the box says, empty when hidden.
func (p *problemBox) Text() string {
	if p.content.Hidden {
		return ""
	}
	return p.line.Text
}

// errorDetails is the error behind a problem line, under a "Details"
// expander, shown only with a problem whose words are not the error's.
type errorDetails struct {
	content *fyne.Container
	box     *problemBox
}

func newErrorDetails() *errorDetails {
	p := newProblemBox()
	p.line.Hide()
	return &errorDetails{content: p.content, box: p}
}

// showProblemWords puts words on the problem line, and err, if any, under
// Details beside it.
func (c *chatView) showProblemWords(words string, err error) {
	c.problem.SetText(sentenceCase(words))
	c.problem.Show()
	if err != nil && err.Error() != words {
		c.details.box.show(words, err)
	} else {
		c.details.box.hide()
	}
}

func (c *chatView) hideProblem() {
	c.problem.Hide()
	c.details.box.hide()
}

// explain says in words what err means and what to do, as a clause to
// follow "could not …:" (callers start a line with sentenceCase); errors
// the app itself worded pass as they are.
func explain(err error) string {
	var addr *net.AddrError
	switch {
	case errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "no such file"):
		return "nothing is there: check the path, or choose the file again"
	case errors.Is(err, fs.ErrPermission):
		return "this app may not read or write there: check the file's permissions"
	case errors.Is(err, syscall.EADDRINUSE):
		return "another program already listens on that address: choose another port"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "this machine has no such address: use 127.0.0.1 (this machine only) or 0.0.0.0 (the network)"
	case errors.As(err, &addr) || strings.Contains(err.Error(), "missing port"):
		return "give the address as host:port, such as 127.0.0.1:11435"
	}
	return err.Error()
}
