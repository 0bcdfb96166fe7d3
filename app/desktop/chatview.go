package desktop

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/engine/adapt"
)

// frameInterval bounds how often a streaming message is redrawn: tokens
// arrive faster than anyone reads them, every redraw re-lays the message out,
// and every frame repaints the whole window on the CPUs the model decodes on
// when the GPU does not draw (docs/measurements/desktop.md, "The desktop
// app").
const frameInterval = 100 * time.Millisecond

// chatView is the chat: conversations on the left, the model picker and
// sampling on top, the messages, the message box and the status line.
type chatView struct {
	a       *App
	content fyne.CanvasObject

	list       *widget.List
	side       *fyne.Container // the conversations
	sideToggle *widget.Button
	sideShown  *bool // the user's choice (nil: by the window's width)
	convList   []*Conversation
	conv       *Conversation

	pick     *modelPicker
	loading  *fyne.Container // an infinite progress bar while a model loads
	problem  *widget.Label
	details  *errorDetails // the error behind the problem line
	system   *widget.Entry
	sampling map[string]*widget.Entry
	hl       *widget.Check

	messages          *fyne.Container
	scroll            *container.Scroll
	views             []*messageView
	input             *messageEntry
	send              *widget.Button
	stop              *widget.Button
	status            *widget.Label
	copied            *copiedNote
	ctxUsed, ctxTotal int // the meter's count (updateStatus)
	ctxBar            *widget.ProgressBar

	mu        sync.Mutex
	cancel    context.CancelFunc
	busy      bool
	follow    bool              // the messages follow their end: the user has not scrolled up
	editAt    int               // the message being edited: resending replaces it and what follows (-1: none)
	sent      string            // the message the reply under way answers, when just sent ("": a regeneration)
	errRow    fyne.CanvasObject // why the last reply failed, below the messages
	overflow  *widget.Select    // what a conversation that outgrows the context does
	pending   *reply
	streaming *messageView // the reply being generated
	scheduled bool
	drawn     *reply // the reply the last draw showed
	lastDraw  time.Time
	frames    []time.Duration // between redraws while streaming, for measurements
	loadingOn bool
}

func newChatView(a *App) *chatView {
	c := &chatView{a: a, editAt: -1, sampling: map[string]*widget.Entry{}}
	c.list = widget.NewList(func() int { return len(c.convList) },
		func() fyne.CanvasObject { return widget.NewLabel("conversation") },
		func(i widget.ListItemID, o fyne.CanvasObject) { o.(*widget.Label).SetText(c.convList[i].Title) })
	c.list.OnSelected = func(i widget.ListItemID) {
		if i < len(c.convList) && !c.isBusy() {
			c.open(c.convList[i])
		}
	}
	newChat := widget.NewButtonWithIcon("New chat", theme.ContentAddIcon(), c.newConversation)
	del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), c.confirmDelete)
	c.side = container.NewBorder(newChat, del, nil, nil, c.list)
	c.sideToggle = widget.NewButtonWithIcon("", theme.MenuIcon(), c.toggleSide)

	c.pick = newModelPicker(c)
	c.loading = container.NewStack()
	c.problem = widget.NewLabel("")
	c.problem.Importance = widget.DangerImportance
	c.problem.Wrapping = fyne.TextWrapWord
	c.problem.Hide()
	c.details = newErrorDetails()
	top := container.NewVBox(container.NewBorder(nil, nil, c.sideToggle, nil, c.pick.content), c.loading, c.problem, c.details.content,
		widget.NewAccordion(widget.NewAccordionItem("System prompt and sampling", c.samplingScroll())))

	c.messages = container.NewVBox()
	c.scroll = container.NewVScroll(c.messages)
	c.scroll.OnScrolled = func(fyne.Position) { c.follow = c.atEnd() }
	c.input = newMessageEntry(c.sendMessage)
	c.input.SetMinRowsVisible(2)
	c.send = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), c.sendMessage)
	c.send.Importance = widget.HighImportance
	c.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), c.stopGenerating)
	c.stop.Disable()
	c.status = widget.NewLabel("No model loaded")
	c.status.Truncation = fyne.TextTruncateEllipsis
	c.ctxBar = widget.NewProgressBar()
	c.ctxBar.TextFormatter = func() string { return c.contextText() } // the words of updateStatus's count
	c.copied = newCopiedNote()
	c.hl = widget.NewCheck("Colour by source:", c.setHighlight)
	c.hl.SetChecked(a.currentPrefs().Highlight)
	bottom := c.bottomBar()
	center := container.NewBorder(top, bottom, nil, nil, container.New(&endLayout{c: c}, c.scroll))
	c.content = container.New(&sideLayout{c: c}, c.side, center)
	c.refreshPicker()
	c.reloadList()
	c.newConversation()
	return c
}

// samplingPanel is the system prompt and the sampling settings, kept per
// model.
func (c *chatView) samplingPanel() fyne.CanvasObject {
	c.system = widget.NewMultiLineEntry()
	c.system.SetPlaceHolder("System prompt (empty: none)")
	c.system.SetMinRowsVisible(2)
	c.system.OnChanged = func(s string) {
		if c.conv != nil {
			c.conv.System = s
		}
		c.savePreset()
	}
	form := widget.NewForm(widget.NewFormItem("System", c.system), widget.NewFormItem("Context full", c.overflowChoice()))
	for _, f := range samplingFields {
		e := widget.NewEntry()
		e.OnChanged = func(string) { c.savePreset() }
		c.sampling[f] = e
		form.Append(sentenceCase(strings.ReplaceAll(f, "_", " ")), e)
	}
	c.sampling["max_tokens"].SetPlaceHolder("0: to the end of the context")
	c.showPreset(defaultPreset)
	return form
}

// samplingFields are the panel's numbers, in its order.
var samplingFields = []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "max_tokens"}

// preset is what the panel says, or which number is not one.
func (c *chatView) preset() (Preset, error) {
	p := Preset{System: c.system.Text}
	floats := map[string]*float32{"temperature": &p.Temperature, "top_p": &p.TopP, "min_p": &p.MinP, "repeat_penalty": &p.RepeatPenalty}
	ints := map[string]*int{"top_k": &p.TopK, "max_tokens": &p.MaxTokens}
	for _, k := range samplingFields {
		text := strings.TrimSpace(c.sampling[k].Text)
		name := strings.ReplaceAll(k, "_", " ")
		if dst, ok := floats[k]; ok {
			v, err := strconv.ParseFloat(text, 32)
			if err != nil {
				return p, fmt.Errorf("%s must be a number, not %q", name, text)
			}
			*dst = float32(v)
			continue
		}
		if text == "" && k == "max_tokens" {
			continue
		}
		v, err := strconv.Atoi(text)
		if err != nil || v < 0 {
			return p, fmt.Errorf("%s must be a whole number, 0 or more, not %q", name, text)
		}
		*ints[k] = v
	}
	return p, nil
}

func (c *chatView) showPreset(p Preset) {
	vals := map[string]string{"temperature": fmt.Sprint(p.Temperature), "top_k": fmt.Sprint(p.TopK), "top_p": fmt.Sprint(p.TopP),
		"min_p": fmt.Sprint(p.MinP), "repeat_penalty": fmt.Sprint(p.RepeatPenalty), "max_tokens": fmt.Sprint(p.MaxTokens)}
	for k, e := range c.sampling {
		e.OnChanged, e.Text = nil, vals[k]
		e.Refresh()
		e.OnChanged = func(string) { c.savePreset() }
	}
	c.system.OnChanged = nil
	c.system.SetText(p.System)
	c.system.OnChanged = func(s string) {
		if c.conv != nil {
			c.conv.System = s
		}
		c.savePreset()
	}
}

// savePreset keeps the panel's settings as the loaded model's preset.
func (c *chatView) savePreset() {
	_, m := c.a.sess.loaded()
	if m == nil {
		return
	}
	pr, err := c.preset()
	if err != nil { // kept once it reads
		return
	}
	p := c.a.currentPrefs()
	p.Presets[m.Fingerprint] = pr
	c.a.setPrefs(p)
}

// loadModel loads a model in the background, with progress, and says
// plainly what went wrong.
func (c *chatView) loadModel(path string) { c.reload(path, nil) }

// reload loads a model in the background; prepare, when set, runs there
// between closing the model loaded (which saves its draft) and opening
// the next.
func (c *chatView) reload(path string, prepare func() error) {
	if c.isBusy() {
		c.stopGenerating()
	}
	c.mu.Lock()
	if c.loadingOn {
		c.mu.Unlock()
		return
	}
	c.loadingOn = true
	c.mu.Unlock()
	c.showLoading(true)
	c.hideProblem()
	c.send.Disable()
	c.status.SetText(sentenceCase("loading " + shortName(path) + "…"))
	prefs := c.a.currentPrefs()
	go func() {
		err := c.a.sess.load(loadOptions{path: path, prefs: prefs, newDrafter: c.a.o.NewDrafter, notify: c.a.notify, prepare: prepare})
		fyne.Do(func() {
			// Done last: whoever waits for the load sees all of it.
			defer func() {
				c.mu.Lock()
				c.loadingOn = false
				c.mu.Unlock()
			}()
			c.showLoading(false)
			c.send.Enable()
			if err != nil {
				c.showProblemWords(fmt.Sprintf("%s could not be loaded: %s.", displayName(path), explain(err)), err)
				c.status.SetText("No model loaded")
				return
			}
			c.loaded(path)
		})
	}()
}

// showLoading puts an infinite progress bar on screen, or takes it off.
// Off screen it is not merely hidden: fyne's infinite bar starts animating
// when it is first laid out, hidden or not, and an animation repaints the
// window every frame.
func (c *chatView) showLoading(on bool) {
	for _, o := range c.loading.Objects {
		o.(*widget.ProgressBarInfinite).Stop()
	}
	c.loading.Objects = nil
	if on {
		c.loading.Objects = []fyne.CanvasObject{widget.NewProgressBarInfinite()}
	}
	c.loading.Refresh()
}

// isLoading reports a model load under way.
func (c *chatView) isLoading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadingOn
}

func displayName(path string) string {
	if path == "" {
		return "the embedded model"
	}
	return path
}

// loaded shows a freshly loaded model: its name, its preset, the status.
func (c *chatView) loaded(path string) {
	_, m := c.a.sess.loaded()
	p := c.a.currentPrefs()
	p.Model = path
	c.a.setPrefs(p)
	c.a.win.SetTitle("Dovetail — " + m.Name)
	c.pick.show(path)
	if pr, ok := p.Presets[m.Fingerprint]; ok {
		c.showPreset(pr)
	} else {
		c.showPreset(defaultPreset)
	}
	if c.conv != nil && c.conv.System != "" {
		c.system.SetText(c.conv.System)
	}
	c.showModelKind(m)
	c.updateStatus(nil)
	c.a.learn.refresh()
	c.a.settings.refresh()
}

func (c *chatView) showProblem(err error) {
	c.showProblemWords(err.Error(), nil)
}

// showNotice shows a runner's warning.
func (c *chatView) showNotice(n runner.Notice) {
	if n.Warning {
		c.problem.SetText(n.String())
		c.problem.Show()
	}
}

// newConversation starts an empty chat.
func (c *chatView) newConversation() {
	if c.isBusy() {
		return
	}
	c.open(&Conversation{ID: newID(), System: c.system.Text})
	c.list.UnselectAll()
}

// open shows a conversation.
func (c *chatView) open(conv *Conversation) {
	c.conv = conv
	c.editAt, c.errRow = -1, nil
	if _, m := c.a.sess.loaded(); m != nil {
		for i := range conv.Messages {
			cutEndTexts(&conv.Messages[i], m.Tok.EOGTexts())
		}
	}
	c.views = nil
	c.messages.Objects = nil
	for i := range conv.Messages {
		c.addView(i)
	}
	c.messages.Refresh()
	if conv.System != "" || len(conv.Messages) > 0 {
		c.system.OnChanged = nil
		c.system.SetText(conv.System)
		c.system.OnChanged = func(s string) { c.conv.System = s; c.savePreset() }
	}
	c.updateStatus(nil)
	c.follow = true
	c.toEnd()
}

// addView shows message i.
func (c *chatView) addView(i int) *messageView {
	m := &c.conv.Messages[i]
	var edit, regen func()
	if m.Role == "user" {
		edit = func() { c.edit(i) }
	} else {
		regen = func() { c.regenerate(i) }
	}
	v := newMessageView(m, c.hl.Checked, c.copy, edit, regen)
	v.body.setWidthHint(c.scroll.Size().Width)
	c.views = append(c.views, v)
	c.messages.Add(v)
	return v
}

func (c *chatView) copy(text string) {
	c.a.fy.Clipboard().SetContent(text)
	c.copied.show()
}

func (c *chatView) setHighlight(on bool) {
	p := c.a.currentPrefs()
	p.Highlight = on
	c.a.setPrefs(p)
	for _, v := range c.views {
		v.highlight = on
		v.update(false)
	}
}

func (c *chatView) reloadList() {
	c.convList = c.a.convs.list()
	c.list.Refresh()
}

func (c *chatView) deleteConversation() {
	if c.conv == nil || c.isBusy() {
		return
	}
	c.a.convs.remove(c.conv.ID)
	c.reloadList()
	c.newConversation()
}

func (c *chatView) isBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

// sendMessage sends the message box's text, or, while a message is being
// edited, replaces that message and what followed it.
func (c *chatView) sendMessage() {
	text := strings.TrimSpace(c.input.Text)
	if text == "" || c.isBusy() || c.isLoading() {
		return
	}
	if r, _ := c.a.sess.loaded(); r == nil {
		c.showProblem(fmt.Errorf("no model is loaded: choose one above"))
		return
	}
	preset, err := c.preset()
	if err == nil {
		err = preset.params(0).Validate()
	}
	if err != nil {
		c.showProblem(fmt.Errorf("sampling: %v", err))
		return
	}
	c.hideProblem()
	if c.editAt >= 0 {
		c.conv.Messages = c.conv.Messages[:c.editAt]
		c.editAt = -1
		c.open(c.conv)
	}
	c.input.SetText("")
	c.conv.Messages = append(c.conv.Messages, Message{Role: "user", Content: text, At: time.Now().UTC()})
	c.addView(len(c.conv.Messages) - 1)
	c.sent = text
	c.generate(preset)
}

// edit puts message i in the message box; sending replaces it.
func (c *chatView) edit(i int) {
	if c.isBusy() {
		return
	}
	c.editAt = i
	c.input.SetText(c.conv.Messages[i].Content)
	c.a.win.Canvas().Focus(c.input)
}

// regenerate answers again in place of the reply at i.
func (c *chatView) regenerate(i int) {
	if c.isBusy() || i != len(c.conv.Messages)-1 {
		return
	}
	preset, err := c.preset()
	if err != nil {
		c.showProblem(fmt.Errorf("sampling: %v", err))
		return
	}
	c.conv.Messages = c.conv.Messages[:i]
	c.open(c.conv)
	c.sent = ""
	c.generate(preset)
}

// generate streams a reply to the conversation.
func (c *chatView) generate(preset Preset) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	// The placeholder drawn below counts as a frame: a reply that ends
	// within frameInterval is drawn once, when it is done.
	c.busy, c.cancel, c.frames, c.lastDraw, c.pending = true, cancel, nil, time.Now(), nil
	c.mu.Unlock()
	c.send.Disable()
	c.stop.Enable()
	c.clearError()
	msgs := append([]Message(nil), c.conv.Messages...)
	answer := Message{Role: "assistant", At: time.Now().UTC()}
	_, m := c.a.sess.loaded()
	markCompletion(m, &answer, msgs)
	c.conv.Messages = append(c.conv.Messages, answer)
	v := c.addView(len(c.conv.Messages) - 1)
	c.mu.Lock()
	c.streaming = v
	c.mu.Unlock()
	v.update(true)
	c.follow = true
	c.toEnd()
	system, seed, stopAt := c.system.Text, uint64(time.Now().UnixNano()), c.a.currentPrefs().StopAtLimit
	pump := startDrawPump(func() { c.draw(v) })
	go c.a.sess.generate(ctx, system, msgs, preset, seed, stopAt, func(r reply) { c.deliver(v, pump, r) })
}

// deliver hands a reply to the UI: at most one redraw per frameInterval,
// and always the last. It runs on the generation's goroutine, once a
// round: until the reply is done it never calls into fyne, and copies
// the segments (which the generation goes on appending to) only for a
// frame.
func (c *chatView) deliver(v *messageView, pump *drawPump, r reply) {
	c.mu.Lock()
	if !r.done {
		due := time.Since(c.lastDraw) >= frameInterval && !c.scheduled
		if due {
			r.segments = slices.Clone(r.segments)
			c.pending, c.scheduled = &r, true
		}
		c.mu.Unlock()
		if due {
			pump.poke()
		}
		return
	}
	c.pending = &r
	c.mu.Unlock()
	pump.close()
	fyne.Do(func() { c.draw(v) })
}

// draw shows the newest reply, on the UI's goroutine.
func (c *chatView) draw(v *messageView) {
	// Another frame may be scheduled once this one is drawn, not before:
	// one draw at a time, and a test can wait for the one under way.
	defer func() {
		c.mu.Lock()
		c.scheduled = false
		c.mu.Unlock()
	}()
	c.mu.Lock()
	r := c.pending
	if r == c.drawn { // the pump and the reply's end both asked for the last
		c.mu.Unlock()
		return
	}
	c.drawn = r
	now := time.Now()
	if !c.lastDraw.IsZero() {
		c.frames = append(c.frames, now.Sub(c.lastDraw))
	}
	c.lastDraw = now
	c.mu.Unlock()
	if r == nil {
		return
	}
	m := v.msg
	m.Content, m.Segments = r.text, r.segments
	st := r.stats
	m.Stats = &st
	if r.dropped > 0 {
		m.Note = droppedNote(r.dropped, r.ctx)
	}
	if r.err != nil && r.done {
		c.failed(v, r.err)
		return
	}
	v.update(!r.done)
	c.updateStatus(&st)
	c.followEnd()
	if !r.done {
		return
	}
	c.save()
	c.followEnd()
	c.idle()
}

// save keeps the conversation, and lists it.
func (c *chatView) save() {
	if err := c.a.convs.save(c.conv); err != nil {
		c.showProblem(fmt.Errorf("the conversation is not saved: %v", err))
	}
	c.reloadList()
	c.a.learn.refresh()
}

// idle ends a reply: Send is offered again. Done last: whoever waits for
// the reply sees all of it.
func (c *chatView) idle() {
	c.send.Enable()
	c.stop.Disable()
	c.mu.Lock()
	c.busy, c.cancel = false, nil
	c.mu.Unlock()
}

// shutdown stops the reply under way and closes the model (which saves
// the draft), then saves the conversation with what the reply had: the
// window is closing, and its loop may not draw the reply's end.
func (c *chatView) shutdown() error {
	c.stopGenerating()
	err := c.a.sess.close()
	c.mu.Lock()
	r, v, busy := c.pending, c.streaming, c.busy
	c.mu.Unlock()
	if busy && r != nil && v != nil {
		m := v.msg
		st := r.stats
		m.Content, m.Segments, m.Stats = r.text, r.segments, &st
		m.Stats.Stopped = true
	}
	if c.conv != nil && len(c.conv.Messages) > 0 {
		if serr := c.a.convs.save(c.conv); err == nil {
			err = serr
		}
	}
	return err
}

// stopGenerating stops the reply under way.
func (c *chatView) stopGenerating() {
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// contextText is the context meter's words, of the count updateStatus
// made: counting tokenizes the whole conversation, once a draw is enough.
func (c *chatView) contextText() string {
	if c.conv == nil || c.ctxTotal == 0 {
		return ""
	}
	return contextWords(c.ctxUsed, c.ctxTotal)
}

// updateStatus says how the model runs and how the last reply went.
func (c *chatView) updateStatus(st *MsgStats) {
	r, m := c.a.sess.loaded()
	if r == nil {
		return
	}
	if c.conv != nil {
		used, total := c.a.sess.contextUse(c.conv.System, c.conv.Messages)
		c.ctxUsed, c.ctxTotal = used, total
		c.ctxBar.Max = float64(max(total, 1))
		c.ctxBar.SetValue(float64(min(used, total)))
	}
	info := r.Draft()
	parts := []string{}
	if st != nil {
		parts = append(parts, formatRate(st.TokensPerSec)+" tokens/s")
		if st.FirstTokenMs > 0 {
			parts = append(parts, "first token "+formatMs(st.FirstTokenMs))
		}
	}
	parts = append(parts, modelOn(m, r), draftWords(info), trainerWords(info, trainerState(r)))
	c.status.SetText(sentenceCase(strings.Join(parts, " · ")))
}

// trainerState is the trainer's state in words.
func trainerState(r *runner.Runner) string {
	st, ok := r.Adaptation()
	switch {
	case !ok && r.Draft().Adapt != adapt.Off:
		return "a new draft starts when the model is idle"
	case !ok:
		return "not learning"
	case st.Paused:
		return fmt.Sprintf("learning paused (version %d)", st.Version)
	case st.Training:
		return fmt.Sprintf("training (version %d)", st.Version)
	case st.Published > 0:
		return fmt.Sprintf("published version %d", st.Version)
	case st.Collecting:
		return "collecting what the model writes"
	}
	return fmt.Sprintf("draft version %d", st.Version)
}

// redraws describes the intervals between redraws of the last streamed
// reply.
func (c *chatView) redraws() string {
	f := c.frameTimes()
	if len(f) == 0 {
		return "drawn once"
	}
	slices.Sort(f)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("%d redraws, interval median %.1f ms, p95 %.1f ms, max %.1f ms",
		len(f)+1, ms(f[len(f)/2]), ms(f[len(f)*95/100]), ms(f[len(f)-1]))
}

// frameTimes are the intervals between redraws of the last streamed
// reply.
func (c *chatView) frameTimes() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.frames...)
}
