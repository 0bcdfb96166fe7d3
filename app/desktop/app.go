package desktop

import (
	"errors"
	"io/fs"
	"os"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"

	"dovetail/app/api"
	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/probe"
	"dovetail/app/runner/pull"
	"dovetail/app/runner/store"
	"dovetail/engine"
)

// Options say how the app starts.
type Options struct {
	Store     *store.Store // nil: the user's
	SkipSetup bool         // start with the defaults, not the setup wizard
	Model     string       // a model file to open ("": the last one, or the embedded one)
	// Places are where models are looked for (nil: the user's files,
	// ollama's and LM Studio's).
	Places *discover.Places
	// Probe reads the machine, saying what it measures as it goes (nil:
	// probe.Run, measuring bandwidth).
	Probe func(progress func(probe.Step)) probe.Report
	// StartAPI starts the API server the settings can turn on
	// (server.Start; nil: none).
	StartAPI api.Start
	// NewDrafter, when set, drafts instead of the model's own drafter (a
	// drafter whose proposals a test knows).
	NewDrafter func(slot int) (engine.Drafter, error)
	// Adapt, when set, is how the draft adapts (a test's, publishing
	// quickly); nil: runner.DefaultAdapt.
	Adapt *runner.Adapt
	// Pulls say where the "Get models" page puts models and how it
	// reaches registries (Dir "": the user's models folder).
	Pulls pull.Options
}

// App is the desktop app: its window, the model it runs, the chat, the
// speed and learning view and the settings.
type App struct {
	fy    fyne.App
	win   fyne.Window
	o     Options
	st    *store.Store
	sess  *session
	convs conversations

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	prefs   Prefs
	models  []discover.Model      // what the picker offers
	facts   map[string]modelFacts // each model's, by path
	notices []runner.Notice

	chat     *chatView
	learn    *learnView
	settings *settingsView
	tabs     *container.AppTabs
	get      *getModels
	wizard   *wizard
}

// New builds the app's window on fy.
func New(fy fyne.App, o Options) (*App, error) {
	st := o.Store
	if st == nil {
		var err error
		if st, err = store.Open(); err != nil {
			return nil, err
		}
	}
	a := &App{fy: fy, o: o, st: st, sess: &session{st: st, start: o.StartAPI, adapt: o.Adapt}, convs: conversations{st}, prefs: loadPrefs(st)}
	if o.Probe == nil {
		a.o.Probe = func(progress func(probe.Step)) probe.Report {
			return probe.Run(probe.Options{Measure: true, Progress: progress})
		}
	}
	a.win = fy.NewWindow("Dovetail")
	a.win.Resize(windowSize(a.prefs))
	a.applyTheme(a.prefs.Theme, false)
	a.chat = newChatView(a)
	a.learn = newLearnView(a)
	a.settings = newSettingsView(a)
	a.get = newGetModels(a, nil, nil)
	a.tabs = container.NewAppTabs(
		container.NewTabItem("Chat", a.chat.content),
		container.NewTabItem("Speed and learning", a.learn.content),
		container.NewTabItem("Settings", a.settings.content),
		container.NewTabItem("Get models", container.NewVScroll(a.get.content)))
	a.tabs.OnSelected = func(t *container.TabItem) {
		if t.Content == a.learn.content {
			a.learn.refresh()
		}
	}
	a.win.SetMainMenu(fyne.NewMainMenu(fyne.NewMenu("Dovetail",
		fyne.NewMenuItem("New chat", a.chat.newConversation),
		fyne.NewMenuItem("Re-tune…", a.showWizard))))
	a.win.SetContent(a.tabs)
	a.win.SetOnClosed(func() { a.Close() })
	a.win.SetOnDropped(a.dropped)
	a.findModels()
	a.chat.refreshPicker()
	return a, nil
}

// Window is the app's window.
func (a *App) Window() fyne.Window { return a.win }

// Start shows the setup wizard on a first start (no settings saved yet),
// else loads the model and focuses the message box.
func (a *App) Start() {
	if _, err := os.Stat(a.st.SettingsPath()); errors.Is(err, fs.ErrNotExist) && !a.o.SkipSetup {
		a.showWizard()
		return
	}
	path := a.o.Model
	if path == "" {
		path = a.prefs.Model
	}
	a.win.Canvas().Focus(a.chat.input)
	a.chat.loadModel(path)
}

// Close keeps the window's size, stops a reply under way, saves the
// conversation, and closes the model, which saves its draft; the window
// closes with the app. Closing again does nothing more.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		a.saveWindowSize()
		a.closeErr = a.chat.shutdown()
	})
	return a.closeErr
}

// currentPrefs and setPrefs read and save the app's settings.
func (a *App) currentPrefs() Prefs {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.prefs
	p.Presets = map[string]Preset{}
	for k, v := range a.prefs.Presets {
		p.Presets[k] = v
	}
	return p
}

func (a *App) setPrefs(p Prefs) error {
	a.mu.Lock()
	a.prefs = p
	a.mu.Unlock()
	return savePrefs(a.st, p)
}

// notify keeps a runner's notice for the status line.
func (a *App) notify(n runner.Notice) {
	a.mu.Lock()
	a.notices = append(a.notices, n)
	a.mu.Unlock()
	fyne.Do(func() { a.chat.showNotice(n) })
}

// showWizard puts the setup wizard in the window; it comes back to the
// tabs when done or cancelled.
func (a *App) showWizard() {
	a.wizard = newWizard(a, func() {
		a.wizard = nil
		a.win.SetContent(a.tabs)
		a.findModels()
		a.chat.refreshPicker()
	})
	a.win.SetContent(a.wizard.content)
	a.wizard.start()
}
