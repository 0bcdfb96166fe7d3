package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/internal/atomicfile"
)

// setCmd is /set: parameter NAME VALUE, system TEXT, wordwrap,
// nowordwrap. A bad one says what is wrong in one line and changes
// nothing.
func (s *chatSession) setCmd(arg string) error {
	what, rest, _ := strings.Cut(arg, " ")
	rest = strings.TrimSpace(rest)
	switch what {
	case "parameter":
		return s.setParameter(rest)
	case "system":
		s.setSystem(rest)
	case "wordwrap", "nowordwrap":
		s.set.wrap = what == "wordwrap"
		fmt.Fprintf(s.out, "set %s\n", what)
	default:
		fmt.Fprintln(s.out, "usage: /set parameter NAME VALUE, /set system TEXT, /set wordwrap or /set nowordwrap")
	}
	return nil
}

func (s *chatSession) setParameter(arg string) error {
	fields := strings.Fields(arg)
	if len(fields) != 2 {
		fmt.Fprintf(s.out, "usage: /set parameter NAME VALUE (the parameters: %s)\n", paramNames())
		return nil
	}
	next := s.set
	if err := next.setParam(fields[0], fields[1]); err != nil {
		fmt.Fprintln(s.out, err)
		return nil
	}
	if next.numCtx != s.set.numCtx {
		if err := s.reopen(next); err != nil {
			fmt.Fprintf(s.out, "num_ctx: %v\n", err)
			return nil
		}
	}
	s.set = next
	fmt.Fprintf(s.out, "set parameter %s to %s\n", fields[0], fields[1])
	return nil
}

// setSystem sets the system prompt, or shows it.
func (s *chatSession) setSystem(text string) {
	if text == "" {
		fmt.Fprintf(s.out, "system prompt: %q\n", s.set.system)
		return
	}
	s.set.system = text
	fmt.Fprintln(s.out, "set the system prompt")
}

// show is /show info, parameters, system or template.
func (s *chatSession) show(what string) {
	switch what {
	case "info":
		s.showInfo()
	case "parameters":
		tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
		for _, p := range chatParams {
			fmt.Fprintf(tw, "  %s\t%s\t(%s)\n", p.name, p.get(&s.set), p.help)
		}
		tw.Flush()
	case "system":
		s.setSystem("")
	case "template":
		d, err := runner.Describe(s.m.Path)
		switch {
		case err != nil:
			fmt.Fprintf(s.out, "no template: %v\n", err)
		case d.ChatTemplate == "" || !s.m.Chat.Jinja():
			fmt.Fprintf(s.out, "the model's own template is not used: messages are formatted as %s\n", s.m.Chat.Family())
		default:
			fmt.Fprintln(s.out, d.ChatTemplate)
		}
	default:
		fmt.Fprintln(s.out, "usage: /show info, /show parameters, /show system or /show template")
	}
}

func (s *chatSession) showInfo() {
	d, err := runner.Describe(s.m.Path)
	if err != nil {
		fmt.Fprintf(s.out, "no information: %v\n", err)
		return
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "    %s\t%v\n", k, v) }
	fmt.Fprintln(tw, "  Model")
	row("name", s.m.Name)
	row("architecture", d.Arch)
	row("parameters", humanCount(d.Params))
	row("context length", fmt.Sprintf("%d (running %d)", d.ContextLength, s.r.Context()))
	row("embedding length", d.Hidden)
	row("quantization", d.Quantization)
	row("draft", s.r.Draft().Name)
	tw.Flush()
}

// load is /load MODEL: another model, the conversation anew, the
// settings kept. The model it cannot load leaves the one there.
func (s *chatSession) load(name string) error {
	if name == "" {
		fmt.Fprintln(s.out, "usage: /load MODEL (a GGUF file or a model's name)")
		return nil
	}
	e, err := findModel(name, s.f.models)
	if err == nil {
		_, err = runner.Describe(e.Path) // a file that is no model stays out before the loaded one goes
	}
	if err != nil {
		fmt.Fprintf(s.out, "not loaded: %v\n", err)
		return nil
	}
	old := s.entry
	s.close()
	if err := s.open(e); err != nil {
		fmt.Fprintf(s.out, "not loaded: %v\n", err)
		if err := s.open(old); err != nil {
			return fmt.Errorf("reloading %s: %w", old.Name, err)
		}
		return nil
	}
	s.history = nil
	fmt.Fprintf(s.out, "loaded %s (draft %s)\n", s.m.Name, s.r.Draft().Name)
	return nil
}

// reopen runs the model again with the settings next (its context
// length), keeping the conversation; on an error the model runs as it
// did.
func (s *chatSession) reopen(next chatSettings) error {
	e := s.entry
	cur := s.set
	s.close()
	s.set = next
	err := s.open(e)
	if err != nil {
		s.set = cur
		if rerr := s.open(e); rerr != nil {
			return fmt.Errorf("%v; and again as it was: %w", err, rerr)
		}
	}
	return err
}

// open opens the model e names and its runner with the flags' options
// and the settings.
func (s *chatSession) open(e discover.Model) error {
	o := s.opts
	o.Greedy = s.set.params.Temperature <= 0
	o.Ctx = s.set.numCtx
	m, r, done, err := openRunner(s.c, e.Path, &o)
	if err != nil {
		return err
	}
	if as := storeName(e); as != "" {
		m.Name = as // a pulled or ollama blob's file name says nothing
	}
	s.m, s.r, s.entry, s.closeM = m, r, e, done
	s.params = runner.ModelParams("", m.Path) // once a model, not a reply
	return nil
}

// close closes the model and its runner, once.
func (s *chatSession) close() {
	if s.closeM != nil {
		s.closeM()
		s.closeM = nil
	}
}

// save is /save FILE (never over a file) and /save! FILE (over one),
// written whole or not at all, private to the user.
func (s *chatSession) save(path string, replace bool) {
	if path == "" {
		fmt.Fprintln(s.out, "usage: /save FILE, or /save! FILE to replace one")
		return
	}
	conv := conversation{Model: s.m.Name, Messages: s.messages()}
	write := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(conv)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		fmt.Fprintf(s.out, "not saved: %s is a folder\n", path)
		return
	}
	var err error
	if replace {
		err = atomicfile.WriteMode(path, 0o600, write)
	} else {
		err = atomicfile.WriteNewMode(path, 0o600, write)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		fmt.Fprintf(s.out, "not saved: %s exists (/save! %s replaces it)\n", path, path)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) { // not the temporary file's name: the user's
			err = fmt.Errorf("%s: %v", path, pe.Err)
		}
		fmt.Fprintf(s.out, "not saved: %v\n", err)
	default:
		fmt.Fprintf(s.out, "saved the conversation to %s\n", path)
	}
}
