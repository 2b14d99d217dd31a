// Package settings reads Kubewarden policy settings from files and keeps the
// settings a long-running host evaluates with, reloading them when the file
// changes.
//
// Kubewarden policies receive their settings as a JSON object. Operators
// write them as YAML (a ConfigMap, a ClusterAdmissionPolicy's settings) or
// JSON; [Decode] accepts both and yields the JSON object. A [Store] holds
// the settings in force; [Store.Run] polls a file and swaps in new settings
// only after the policy's validate_settings accepted them, so a bad edit of
// a mounted ConfigMap is logged and ignored while the old settings stay in
// force (as YuniKorn's own configuration hot refresh behaves).
package settings

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"
)

// Empty is the settings object used when none is given.
var Empty = json.RawMessage("{}")

// Decode turns a settings document into a JSON object. JSON input is passed
// on byte for byte (trimmed); anything else is read as YAML and converted.
// An empty document, or one holding only comments, means {}. source names
// the input in errors.
func Decode(source string, data []byte) (json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Empty, nil
	}
	if json.Valid(data) {
		return JSONObject(source, data)
	}
	converted, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("read settings %s: neither JSON nor YAML: %w", source, err)
	}
	converted = bytes.TrimSpace(converted)
	if string(converted) == "null" { // comments only
		return Empty, nil
	}
	return JSONObject(source, converted)
}

// JSONObject checks that data is one JSON object, as Kubewarden policies
// take their settings, and returns it trimmed. YAML is not accepted.
func JSONObject(source string, data []byte) (json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, fmt.Errorf("read settings %s: invalid JSON: %w", source, err)
	}
	if data[0] != '{' {
		return nil, fmt.Errorf("read settings %s: settings must be a JSON object, got %s", source, kind(data))
	}
	return json.RawMessage(data), nil
}

func kind(data []byte) string {
	switch data[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// ReadFile reads and decodes a settings file.
func ReadFile(path string) (json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	return Decode(path, data)
}

// Validator asks the policy whether settings are acceptable: it returns
// whether they are valid and the policy's message, or an error when the
// question could not be asked (the guest failed).
type Validator func(ctx context.Context, settings json.RawMessage) (valid bool, message string, err error)

// InvalidError is the policy's rejection of its settings.
type InvalidError struct {
	// Source names the settings (a file, or a flag).
	Source string
	// Message is the policy's explanation.
	Message string
}

// Error implements error, in the words kwctl uses.
func (e *InvalidError) Error() string {
	return "provided settings are not valid: " + e.Message
}

// SplitRemark splits the message of settings the policy accepted into its
// warnings (what is probably a mistake) and its notes (what a deliberate
// setting implies): this policy writes each kind on its own line, after
// "warning: " or "note: ". A line with neither prefix (another policy's
// message) is a warning.
func SplitRemark(message string) (warnings, notes string) {
	var w, n []string
	for _, line := range strings.Split(message, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "note: "):
			n = append(n, line)
		default:
			w = append(w, line)
		}
	}
	return strings.Join(w, "\n"), strings.Join(n, "\n")
}

// Reload outcomes, as reported to Options.OnReload.
const (
	// ReloadApplied means new settings were accepted and are now in force.
	ReloadApplied = "applied"
	// ReloadInvalid means the policy refused the new settings; the old ones
	// stay in force.
	ReloadInvalid = "invalid"
	// ReloadFailed means the file could not be read or decoded, or the
	// policy could not be asked; the old settings stay in force.
	ReloadFailed = "failed"
)

// DefaultInterval is how often Run looks at the settings file.
const DefaultInterval = 10 * time.Second

// Options configure a Store.
type Options struct {
	// Path is the settings file to watch. Empty: the settings never change
	// and Run returns at once.
	Path string
	// Interval is how often Run reads the file. Default: DefaultInterval.
	Interval time.Duration
	// Validate checks new settings with the policy. Required with Path.
	Validate Validator
	// Logger receives reload outcomes. Default: discard.
	Logger *slog.Logger
	// OnReload, if set, is called after each attempt to load changed
	// content with one of the Reload* outcomes (for metrics).
	OnReload func(outcome string)
}

func (o *Options) setDefaults() {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnReload == nil {
		o.OnReload = func(string) {}
	}
}

// Store holds the settings in force. Current is safe for concurrent use
// and never blocks.
type Store struct {
	opts    Options
	current atomic.Pointer[json.RawMessage]

	// refused are the settings the program started with and the policy
	// refused (NewRefusedStore): while none are in force, finding them in
	// the file again is no change.
	refused json.RawMessage

	mu sync.Mutex // serialises Reload
	// seen is the hash of the file content last looked at, applied or not,
	// so that an unchanged bad file is reported once, not at every poll.
	seen [sha256.Size]byte
}

// NewStore returns a Store holding initial, which the caller has already
// validated (a program must refuse to start with invalid settings, so the
// first validation is the caller's, with its own error path). With a Path,
// initial is normally that file's content; the first poll then finds the
// same settings and validates nothing, and if the file changed in between,
// the change is picked up.
func NewStore(initial json.RawMessage, opts Options) (*Store, error) {
	opts.setDefaults()
	if opts.Path != "" && opts.Validate == nil {
		return nil, errors.New("settings store: a Validate function is required to watch a file")
	}
	s := &Store{opts: opts}
	s.set(initial)
	return s, nil
}

// NewRefusedStore returns a Store with no settings in force: the program
// started with refused, read from opts.Path, and the policy refused them
// (or refused is nil: the file could not be read or decoded). Current
// returns nil until Reload finds settings the policy accepts in the file;
// until then a program serves nothing but its probes, not ready, instead
// of exiting (a Deployment's replica restarted while a typo stands must
// not crash-loop). The unchanged file is not validated again.
func NewRefusedStore(refused json.RawMessage, opts Options) (*Store, error) {
	opts.setDefaults()
	if opts.Path == "" || opts.Validate == nil {
		return nil, errors.New("settings store: refused settings can only be waited out with a settings file and a Validate function")
	}
	return &Store{opts: opts, refused: refused}, nil
}

func (s *Store) set(v json.RawMessage) {
	if len(bytes.TrimSpace(v)) == 0 {
		v = Empty
	}
	s.current.Store(&v)
}

// Current returns the settings in force, nil while there are none (see
// NewRefusedStore). The bytes must not be modified.
func (s *Store) Current() json.RawMessage {
	if p := s.current.Load(); p != nil {
		return *p
	}
	return nil
}

// Run reloads the settings file every Interval until ctx is done. Without
// a Path it returns at once.
func (s *Store) Run(ctx context.Context) {
	if s.opts.Path == "" {
		return
	}
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.Reload(ctx)
		}
	}
}

// Reload reads the file once and, if its content changed since it was last
// looked at, validates it and puts it in force. It returns nil when nothing
// changed or the new settings were applied, and the reason otherwise; the
// settings in force then stay as they were.
func (s *Store) Reload(ctx context.Context) error {
	if s.opts.Path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.opts.Logger.With("path", s.opts.Path)
	keeping := "keeping the settings in force"
	if s.Current() == nil {
		keeping = "still no settings in force: not ready"
	}

	data, err := os.ReadFile(s.opts.Path)
	if err != nil {
		// A ConfigMap volume swaps its files atomically, so a missing file
		// is a real problem, reported at every poll until fixed.
		log.WarnContext(ctx, "settings reload failed; "+keeping, "error", err)
		s.opts.OnReload(ReloadFailed)
		s.seen = [sha256.Size]byte{}
		return fmt.Errorf("read settings: %w", err)
	}
	sum := sha256.Sum256(data)
	if sum == s.seen {
		return nil
	}
	s.seen = sum

	next, err := Decode(s.opts.Path, data)
	if err != nil {
		log.WarnContext(ctx, "settings reload failed; "+keeping, "error", err)
		s.opts.OnReload(ReloadFailed)
		return err
	}
	// next is never empty: Decode makes an empty file {}.
	if cur := s.Current(); bytes.Equal(next, cur) || cur == nil && bytes.Equal(next, s.refused) {
		return nil
	}
	valid, message, err := s.opts.Validate(ctx, next)
	if err != nil {
		// The guest failed, not the settings: try again at the next poll.
		s.seen = [sha256.Size]byte{}
		log.WarnContext(ctx, "settings reload failed; "+keeping, "error", err)
		s.opts.OnReload(ReloadFailed)
		return fmt.Errorf("validate settings: %w", err)
	}
	if !valid {
		log.WarnContext(ctx, "new settings refused by the policy; "+keeping, "message", message)
		s.opts.OnReload(ReloadInvalid)
		return &InvalidError{Source: s.opts.Path, Message: message}
	}
	s.set(next)
	warnings, notes := SplitRemark(message)
	switch {
	case warnings != "":
		log.WarnContext(ctx, "settings reloaded; the policy accepted them with a remark", "bytes", len(next), "message", message)
	case notes != "":
		log.InfoContext(ctx, "settings reloaded", "bytes", len(next), "note", notes)
	default:
		log.InfoContext(ctx, "settings reloaded", "bytes", len(next))
	}
	s.opts.OnReload(ReloadApplied)
	return nil
}

// Overlay returns base with the top-level keys of overlay set over it (a
// key in both takes overlay's value). Both must be JSON objects; base may
// also be null or empty, meaning {}. The result's keys are sorted.
func Overlay(base, overlay json.RawMessage) (json.RawMessage, error) {
	var b, o map[string]json.RawMessage
	if t := bytes.TrimSpace(base); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &b); err != nil {
			return nil, fmt.Errorf("overlay settings: the settings are not a JSON object: %w", err)
		}
	}
	if err := json.Unmarshal(overlay, &o); err != nil || o == nil {
		return nil, fmt.Errorf("overlay settings: the overlay must be a JSON object: %s", overlay)
	}
	if b == nil {
		b = map[string]json.RawMessage{}
	}
	for k, v := range o {
		b[k] = v
	}
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("overlay settings: %w", err)
	}
	return out, nil
}
