package desktop

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// failed takes a failed reply out of the conversation and says why below
// it: an error is not the model's reply, and is not saved as one. What
// the reply had written before it failed stays, marked stopped. A message
// just sent goes back in the message box, to send again; a regeneration
// offers to try again.
func (c *chatView) failed(v *messageView, err error) {
	n := len(c.conv.Messages) - 1 // the reply
	if v.msg.Content != "" {
		v.msg.Stats.Stopped = true
		v.update(false)
	} else {
		c.conv.Messages = c.conv.Messages[:n]
		c.dropLastView()
	}
	var retry func()
	if last := len(c.conv.Messages) - 1; c.sent != "" && last >= 0 && c.conv.Messages[last].Role == "user" && c.conv.Messages[last].Content == c.sent {
		c.conv.Messages = c.conv.Messages[:last]
		c.dropLastView()
		if c.input.Text == "" {
			c.input.SetText(c.sent)
		}
	} else if last >= 0 && c.conv.Messages[last].Role == "user" {
		retry = c.retry
	}
	c.showError(err, retry)
	if len(c.conv.Messages) > 0 {
		c.save()
	}
	c.updateStatus(nil)
	c.followEnd()
	c.idle()
}

// dropLastView takes the last message's view off the screen.
func (c *chatView) dropLastView() {
	v := c.views[len(c.views)-1]
	c.views = c.views[:len(c.views)-1]
	c.messages.Remove(v)
}

// retry answers the conversation's last message again.
func (c *chatView) retry() {
	if c.isBusy() || len(c.conv.Messages) == 0 {
		return
	}
	preset, err := c.preset()
	if err != nil {
		c.showProblem(err)
		return
	}
	c.sent = ""
	c.generate(preset)
}

// showError puts why a reply failed below the messages, in the error
// colour, with Try again where that can help.
func (c *chatView) showError(err error, retry func()) {
	c.clearError()
	text := widget.NewLabel(sentenceCase(err.Error()))
	text.Importance = widget.DangerImportance
	text.Wrapping = fyne.TextWrapWord
	var right fyne.CanvasObject
	if retry != nil {
		right = widget.NewButtonWithIcon("Try again", theme.ViewRefreshIcon(), retry)
	}
	icon := widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))
	c.errRow = container.NewBorder(nil, nil, icon, right, text)
	c.messages.Add(c.errRow)
}

// clearError takes the error row away.
func (c *chatView) clearError() {
	if c.errRow != nil {
		c.messages.Remove(c.errRow)
		c.errRow = nil
	}
}

// overflowChoice is the setting for a conversation that outgrows the
// context.
func (c *chatView) overflowChoice() fyne.CanvasObject {
	const roll, stop = "Leave out the oldest messages", "Stop and say so"
	c.overflow = widget.NewSelect([]string{roll, stop}, nil)
	if c.a.currentPrefs().StopAtLimit {
		c.overflow.SetSelected(stop)
	} else {
		c.overflow.SetSelected(roll)
	}
	c.overflow.OnChanged = func(s string) {
		p := c.a.currentPrefs()
		p.StopAtLimit = s == stop
		c.a.setPrefs(p)
		c.updateStatus(nil)
	}
	return c.overflow
}
