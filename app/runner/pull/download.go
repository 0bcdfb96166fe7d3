package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"dovetail/internal/sizes"
)

// stallAfter is how long a download's body may send nothing before the
// request is dropped and tried again from where it stopped.
var stallAfter = 30 * time.Second

var errStalled = errors.New("the download stalled (no data for a while)")

// progressEvery spaces a blob's progress reports.
const progressEvery = 100 * time.Millisecond

// Interrupted is a pull stopped by its context (Ctrl-C): the bytes
// downloaded are kept, and the next pull resumes from them.
type Interrupted struct {
	Name        string
	Partial     string // the partial file kept
	Have, Total int64
	Err         error // the context's
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("%s: interrupted; %s of %s kept in %s: pull again to resume", e.Name, humanBytes(e.Have), humanBytes(e.Total), e.Partial)
}

func (e *Interrupted) Unwrap() error { return e.Err }

// DigestError is a download whose bytes are not what the manifest (or
// Hugging Face's LFS digest) says: the partial file is deleted.
type DigestError struct {
	Name, Want, Got string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s: the download's SHA-256 is %s, not %s as the registry says: the partial file is deleted; pull again", e.Name, e.Got, e.Want)
}

func blobPath(dir, hex string) string { return filepath.Join(dir, "blobs", "sha256-"+hex) }

// download is one blob's download into the models folder.
type download struct {
	f        *fetcher
	l        layer
	url      string
	final    string
	partial  string
	progress func(Progress)
	have     int64
	shown    atomic.Int64 // have, for the progress ticker
	sum      hash.Hash
	file     *os.File
}

// fetchBlob downloads a layer into blobs/sha256-HEX: into a partial file
// beside it first, resumed with a Range request where an earlier pull
// stopped, and renamed into place only once its SHA-256 is the layer's.
func fetchBlob(ctx context.Context, f *fetcher, dir string, l layer, u string, progress func(Progress)) error {
	d := &download{f: f, l: l, url: u, final: blobPath(dir, l.hex()), progress: progress}
	d.partial = d.final + "-partial"
	if st, err := os.Stat(d.final); err == nil && st.Size() == l.Size {
		d.report(l.Size)
		return nil
	}
	defer func() {
		if d.file != nil {
			d.file.Close()
		}
	}()
	if err := d.open(); err != nil {
		return err
	}
	if err := d.fetch(ctx); err != nil {
		return err
	}
	return d.finish()
}

// open opens the partial file and reads what it holds into the digest.
func (d *download) open() error {
	file, err := os.OpenFile(d.partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", d.f.name, err)
	}
	d.file = file
	ok, err := lock(file)
	if err != nil {
		return fmt.Errorf("%s: %w", d.f.name, err)
	}
	if !ok {
		return fmt.Errorf("%s: another pull is downloading this model into %s now", d.f.name, d.partial)
	}
	st, err := file.Stat()
	if err != nil {
		return err
	}
	d.sum = sha256.New()
	if st.Size() > d.l.Size {
		return d.restart()
	}
	n, err := io.Copy(d.sum, file)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", d.f.name, d.partial, err)
	}
	d.have = n
	d.shown.Store(n)
	return nil
}

// restart empties the partial file: the server sent the whole blob, not
// the part asked for.
func (d *download) restart() error {
	if err := d.file.Truncate(0); err != nil {
		return err
	}
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	d.have = 0
	d.shown.Store(0)
	d.sum.Reset()
	return nil
}

// fetch asks for the bytes missing until all are there. A body cut short,
// stalled or reset resumes from where it stopped; tries that bring
// nothing count towards maxTries.
func (d *download) fetch(ctx context.Context) error {
	d.report(d.have)
	restarted := false
	for fails := 0; d.have < d.l.Size; {
		before := d.have
		err := d.fetchOnce(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			d.file.Sync()
			return &Interrupted{Name: d.f.name, Partial: d.partial, Have: d.have, Total: d.l.Size, Err: ctx.Err()}
		}
		var se *StatusError
		var ne *NetError
		if errors.As(err, &se) && se.Code == http.StatusRequestedRangeNotSatisfiable && d.have > 0 && !restarted {
			// The partial file is not a start of this blob: begin again.
			restarted = true
			if err := d.restart(); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, errTooLong) {
			return fmt.Errorf("%s: %w", d.f.name, err)
		}
		if errors.As(err, &se) || errors.As(err, &ne) {
			return err // do has retried what it can
		}
		if d.have > before {
			fails = 0
		}
		if fails++; fails >= maxTries {
			return &NetError{Name: d.f.name, Host: hostOf(d.url), Tries: fails, Err: err}
		}
		if err := sleep(ctx, backoff(fails)); err != nil {
			return &Interrupted{Name: d.f.name, Partial: d.partial, Have: d.have, Total: d.l.Size, Err: err}
		}
	}
	return nil
}

var errTooLong = errors.New("the server sent more bytes than the manifest says the file has")

// fetchOnce makes one request for the missing bytes and writes what its
// body brings.
func (d *download) fetchOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := http.Header{}
	if d.have > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(d.have, 10)+"-")
	}
	resp, err := d.f.do(ctx, http.MethodGet, d.url, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != d.have {
			return fmt.Errorf("the server sent bytes from %d, not %d as asked", start, d.have)
		}
	case resp.StatusCode == http.StatusOK:
		if d.have > 0 {
			if err := d.restart(); err != nil {
				return err
			}
		}
	default:
		return &StatusError{Name: d.f.name, URL: d.url, Code: resp.StatusCode, HF: d.f.hf, Tries: 1}
	}
	body := &stallReader{r: resp.Body, cancel: cancel}
	body.arm()
	defer body.stop()
	stop := d.tick()
	err = d.copy(body)
	stop()
	if body.stalled() && ctx.Err() != nil {
		return errStalled
	}
	return err
}

// copy writes the body into the partial file and the digest, reporting
// as it goes. One byte more than missing is read so that a body too long
// is caught.
func (d *download) copy(r io.Reader) error {
	buf := make([]byte, 256<<10)
	lim := io.LimitReader(r, d.l.Size-d.have+1)
	for {
		n, err := lim.Read(buf)
		if n > 0 {
			if d.have+int64(n) > d.l.Size {
				return errTooLong
			}
			if _, werr := d.file.Write(buf[:n]); werr != nil {
				return fmt.Errorf("%s: writing %s: %w", d.f.name, d.partial, werr)
			}
			d.sum.Write(buf[:n])
			d.have += int64(n)
			d.shown.Store(d.have)
		}
		if err == io.EOF {
			if d.have < d.l.Size {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// finish checks the digest and moves the file into place.
func (d *download) finish() error {
	d.progress(Progress{Status: "verifying sha256 digest", Digest: d.l.Digest})
	got := hex.EncodeToString(d.sum.Sum(nil))
	if got != d.l.hex() {
		d.file.Close()
		d.file = nil
		os.Remove(d.partial)
		return &DigestError{Name: d.f.name, Want: d.l.Digest, Got: "sha256:" + got}
	}
	if err := d.file.Sync(); err != nil {
		return err
	}
	if err := os.Rename(d.partial, d.final); err != nil {
		return fmt.Errorf("%s: %w", d.f.name, err)
	}
	return nil
}

// report sends the blob's progress.
func (d *download) report(done int64) {
	d.progress(Progress{Status: "pulling " + d.l.hex()[:12], Digest: d.l.Digest, Total: d.l.Size, Completed: done})
}

// tick reports the progress every progressEvery while a body is read,
// and once more when stop is called: a body that pauses still shows
// where it is.
func (d *download) tick() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		last := int64(-1)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if n := d.shown.Load(); n != last {
					d.report(n)
					last = n
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		d.report(d.shown.Load())
	}
}

// rangeStart is where a Content-Range ("bytes START-END/TOTAL") starts.
func rangeStart(h string) (int64, bool) {
	s, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok = strings.Cut(s, "-")
	n, err := strconv.ParseInt(s, 10, 64)
	return n, ok && err == nil
}

// stallReader cancels its request when the body sends nothing for
// stallAfter.
type stallReader struct {
	r      io.Reader
	cancel context.CancelFunc
	mu     sync.Mutex
	t      *time.Timer
	fired  bool
}

func (s *stallReader) arm() {
	s.t = time.AfterFunc(stallAfter, func() {
		s.mu.Lock()
		s.fired = true
		s.mu.Unlock()
		s.cancel()
	})
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.t.Reset(stallAfter)
	}
	return n, err
}

func (s *stallReader) stop() { s.t.Stop() }

func (s *stallReader) stalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// humanBytes writes a size in binary units ("1.2 GiB").
func humanBytes(n int64) string { return sizes.Bytes(uint64(max(n, 0))) }
