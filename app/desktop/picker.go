package desktop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/discover"
)

// modelPicker is the chat's model row: the models found, each with its
// parameters, quantization and size; a path typed in; Open…, a file
// chooser that shows GGUF files.
type modelPicker struct {
	c       *chatView
	sel     *widget.Select
	rows    []discover.Model // the model of each option, in order
	path    *widget.Entry
	open    *widget.Button
	dialog  *dialog.FileDialog // the last Open… shown
	content fyne.CanvasObject
}

// ggufFilter is what Open… shows: GGUF files (and folders to walk into).
var ggufFilter = storage.NewExtensionFileFilter([]string{".gguf"})

// pathWidth is the typed-path box's width: a file name shows, the picker
// keeps the rest.
const pathWidth = 160

func newModelPicker(c *chatView) *modelPicker {
	p := &modelPicker{c: c}
	p.sel = widget.NewSelect(nil, nil)
	p.sel.PlaceHolder = "Choose a model"
	p.path = widget.NewEntry()
	p.path.SetPlaceHolder("Or type a .gguf path")
	p.path.OnSubmitted = func(s string) { p.openPath(s) }
	p.open = widget.NewButtonWithIcon("Open…", theme.FolderOpenIcon(), p.showOpen)
	box := container.NewGridWrap(fyne.NewSize(pathWidth, p.path.MinSize().Height), p.path)
	p.content = container.NewBorder(nil, nil, widget.NewLabel("Model"), container.NewHBox(box, p.open), p.sel)
	return p
}

// refresh offers the models found, keeping the one selected.
func (p *modelPicker) refresh() {
	selected := p.selectedPath()
	ms := p.c.a.modelList()
	opts := make([]string, 0, len(ms))
	seen := map[string]bool{}
	for _, m := range ms {
		row := pickerRow(m, p.c.a.factsOf(m.Path))
		if seen[row] { // two files of one name: their folders tell them apart
			row += " · " + filepath.Dir(m.Path)
		}
		seen[row] = true
		opts = append(opts, row)
	}
	p.sel.OnChanged = nil
	p.rows, p.sel.Options = ms, opts
	p.sel.Selected = ""
	if selected != nil {
		p.mark(*selected)
	}
	p.sel.Refresh()
	p.sel.OnChanged = func(string) {
		if i := p.sel.SelectedIndex(); i >= 0 && i < len(p.rows) {
			p.c.loadModel(p.rows[i].Path)
		}
	}
}

// selectedPath is the path of the model selected (nil: none).
func (p *modelPicker) selectedPath() *string {
	i := p.sel.SelectedIndex()
	if i < 0 || i >= len(p.rows) {
		return nil
	}
	return &p.rows[i].Path
}

// show selects the model at path ("": the embedded one) without loading
// it again.
func (p *modelPicker) show(path string) {
	cb := p.sel.OnChanged
	p.sel.OnChanged = nil
	p.mark(path)
	p.sel.Refresh()
	p.sel.OnChanged = cb
}

func (p *modelPicker) mark(path string) {
	for i, m := range p.rows {
		if samePath(m.Path, path) {
			p.sel.Selected = p.sel.Options[i]
			return
		}
	}
}

func samePath(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// showOpen shows a file chooser that lists GGUF files, as large as the
// window allows, starting where the last model was opened.
func (p *modelPicker) showOpen() {
	win := p.c.a.win
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		path := r.URI().Path()
		r.Close()
		p.openPath(path)
	}, win)
	d.SetTitleText("Open a model (.gguf)")
	d.SetConfirmText("Open")
	d.SetFilter(ggufFilter)
	if dir := p.startDir(); dir != nil {
		d.SetLocation(dir)
	}
	s := win.Canvas().Size()
	d.Resize(fyne.NewSize(s.Width*0.9, s.Height*0.9))
	p.dialog = d
	d.Show()
}

// startDir is the folder of the file opened last, when it is still there.
func (p *modelPicker) startDir() fyne.ListableURI {
	opened := p.c.a.currentPrefs().Opened
	if len(opened) == 0 {
		return nil
	}
	dir := opened[0]
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	l, err := storage.ListerForURI(storage.NewFileURI(dir))
	if err != nil {
		return nil
	}
	return l
}

// openPath adds a GGUF file or a folder of them, typed, chosen or
// dropped; a file loads at once.
func (p *modelPicker) openPath(path string) {
	path = expandHome(strings.TrimSpace(path))
	if path == "" {
		return
	}
	ms, err := p.c.a.addModelPath(path)
	if err != nil {
		p.c.showProblem(openProblem(path, err))
		return
	}
	p.c.problem.Hide()
	p.path.SetText("")
	p.refresh()
	if st, err := os.Stat(path); err == nil && !st.IsDir() && len(ms) == 1 {
		p.c.loadModel(ms[0].Path)
	}
}

// expandHome reads "~/" as the home folder, as a shell would.
func expandHome(path string) string {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, rest)
}

// openProblem says in one line why path did not open, and what to do.
func openProblem(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("There is no file or folder at %s: check the path and try again", path)
	}
	return fmt.Errorf("%s cannot be opened: %s", path, strings.TrimPrefix(err.Error(), "models: "))
}

// dropped opens what was dropped on the window: a GGUF file loads, a
// folder is searched for models; anything else says what is wanted.
func (a *App) dropped(_ fyne.Position, uris []fyne.URI) {
	for _, u := range uris {
		if u.Scheme() != "file" {
			continue
		}
		st, err := os.Stat(u.Path())
		if err == nil && (st.IsDir() || strings.EqualFold(u.Extension(), ".gguf")) {
			a.chat.pick.openPath(u.Path())
			return
		}
	}
	a.chat.showProblem(errors.New("Only GGUF model files (.gguf) or folders of them open here"))
}

// refreshPicker offers the models found.
func (c *chatView) refreshPicker() { c.pick.refresh() }
