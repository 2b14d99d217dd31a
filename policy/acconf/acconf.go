// Package acconf is the one mapping from the admissionController.* keys of
// YuniKorn's yunikorn-configs (over yunikorn-defaults) to this policy's
// settings: which key becomes which setting, how YuniKorn 1.9 reads its
// value (booleans with strconv.ParseBool, pattern lists split at every
// comma, trimmed, empty pieces skipped, the whole list replaced by its
// default when a piece does not compile: k8shim v1.9
// pkg/admission/conf/am_conf.go), and the remarks on where the two differ.
//
// migrate (internal/yunikorn/ykconfig) prints settings with it, and the
// policy's followYuniKornConfig setting applies it live to the ConfigMaps
// it reads through the host's get_resource capability. It is pure (no I/O)
// and TinyGo-friendly: no fmt, no reflection, no goroutines.
package acconf

import (
	"strconv"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/policy/boundedre"
)

// YuniKorn's keys (k8shim v1.9 pkg/admission/conf/am_conf.go).
const (
	KeyBypassAuth          = "admissionController.accessControl.bypassAuth"
	KeyTrustControllers    = "admissionController.accessControl.trustControllers"
	KeySystemUsers         = "admissionController.accessControl.systemUsers"
	KeyExternalUsers       = "admissionController.accessControl.externalUsers"
	KeyExternalGroups      = "admissionController.accessControl.externalGroups"
	KeyProcessNamespaces   = "admissionController.filtering.processNamespaces"
	KeyBypassNamespaces    = "admissionController.filtering.bypassNamespaces"
	KeyLabelNamespaces     = "admissionController.filtering.labelNamespaces"
	KeyNoLabelNamespaces   = "admissionController.filtering.noLabelNamespaces"
	KeyGenerateUniqueAppID = "admissionController.filtering.generateUniqueAppId"
)

// YuniKorn 1.9's defaults of the mapped keys.
const (
	DefaultSystemUsers      = "^system:serviceaccount:kube-system:"
	DefaultBypassNamespaces = "^kube-system$"
)

// PolicyDefaultSystemUsers is the policy's own default of systemUsers
// (docs/BEHAVIOUR.md §3), which adds kube-controller-manager's identity to
// YuniKorn's.
var PolicyDefaultSystemUsers = []string{"^system:serviceaccount:kube-system:", "^system:kube-controller-manager$"}

// Status says what became of a key.
type Status string

// The statuses of a Note.
const (
	// Mapped: the key became a setting that behaves as YuniKorn does.
	Mapped Status = "mapped"
	// Differs: mapped, or left to a default, but the policy behaves
	// differently from YuniKorn here.
	Differs Status = "differs"
	// Invalid: YuniKorn cannot use the value and runs with its default.
	Invalid Status = "invalid"
	// NotMapped: the policy has nothing that does what the key does.
	NotMapped Status = "not mapped"
	// Ignored: YuniKorn's admission controller does not read the key.
	Ignored Status = "ignored"
	// Warning: carried over as YuniKorn runs it, with a consequence to act
	// on.
	Warning Status = "warning"
	// HandedOver: bypassAuth "true", which makes YuniKorn's admission
	// controller stand aside; it is not carried over (HandOverText).
	HandedOver Status = "handed over"
)

// Note is one remark of the mapping on a key.
type Note struct {
	Key    string
	Status Status
	Text   string
}

// Entry is a key as the ConfigMaps set it.
type Entry struct {
	Value string
	Set   bool
	// From is added to a note on the value: "" when it comes from
	// yunikorn-configs, else where it comes from, as " (from ...)".
	From string
}

// Lookup returns the entry of a key.
type Lookup func(key string) Entry

// Field is what a key maps to.
type Field struct {
	Key     string // YuniKorn's key
	Setting string // the policy setting: "systemUsers", "scheduling.bypassNamespaces"
	Set     bool   // the ConfigMaps set the key
	// Invalid: set, but YuniKorn cannot use the value; it runs with the
	// default, which Bool or Patterns then hold.
	Invalid bool
	List    bool
	// Bool or Patterns are the value YuniKorn runs with: the key's, or the
	// default when the key is not set or invalid.
	Bool     bool
	Patterns []string
	// HandedOver: bypassAuth "true", not carried over (HandOverText).
	HandedOver bool
}

// Mapper maps keys, collecting its notes.
type Mapper struct {
	Look  Lookup
	Notes []Note
}

func (m *Mapper) note(key string, s Status, text string) {
	m.Notes = append(m.Notes, Note{Key: key, Status: s, Text: text})
}

// HandOverText says why bypassAuth "true" is not carried over.
const HandOverText = "YuniKorn's admission controller with bypassAuth neither checks nor writes user.info: this is how it stands " +
	"aside once this policy records and checks the submitter (the hand-over), or a YuniKorn that checks nothing. Either way it is " +
	"not this policy's setting: carried over, this policy would accept any supplied user.info, so it is left out and the " +
	"policy records every submitter and refuses forged values. Set bypassAuth: true in the policy's own settings only to " +
	"accept supplied values on purpose"

// BypassAuth maps admissionController.accessControl.bypassAuth. "true" is
// never carried over: the field is then not Set but HandedOver, with a
// HandedOver note (HandOverText), and Bool false.
func (m *Mapper) BypassAuth() Field {
	if e := m.Look(KeyBypassAuth); e.Set {
		if v, ok := ParseBool(e.Value); ok && v {
			m.note(KeyBypassAuth, HandedOver, strconv.Quote(e.Value)+e.From+": "+HandOverText)
			return Field{Key: KeyBypassAuth, Setting: "bypassAuth", HandedOver: true}
		}
	}
	return m.Bool(KeyBypassAuth, "bypassAuth", false)
}

// TrustControllers maps admissionController.accessControl.trustControllers.
func (m *Mapper) TrustControllers() Field {
	return m.Bool(KeyTrustControllers, "trustControllers", true)
}

// SystemUsers maps admissionController.accessControl.systemUsers. (Not
// set, the policy's default differs from YuniKorn's: the caller says what
// follows.)
func (m *Mapper) SystemUsers() Field {
	return m.List(KeySystemUsers, "systemUsers", DefaultSystemUsers)
}

// External maps externalUsers (groups false) or externalGroups (true).
func (m *Mapper) External(groups bool) Field {
	key, setting := KeyExternalUsers, "externalUsers"
	if groups {
		key, setting = KeyExternalGroups, "externalGroups"
	}
	f := m.List(key, setting, "")
	if f.Set && len(f.Patterns) > 0 {
		m.note(key, Differs, "a value these submitters supply must be a JSON object with a non-empty string user and "+
			"optionally groups, nothing else (docs/BEHAVIOUR.md §4.1); YuniKorn 1.9 accepts any JSON its user and groups "+
			"structure decodes, even {} or null")
	}
	return f
}

// AccessControl maps the five access control keys, in the policy's order.
func (m *Mapper) AccessControl() []Field {
	return []Field{m.BypassAuth(), m.TrustControllers(), m.SystemUsers(), m.External(false), m.External(true)}
}

// Bool maps a YuniKorn boolean key.
func (m *Mapper) Bool(key, setting string, def bool) Field {
	f := Field{Key: key, Setting: setting, Bool: def}
	e := m.Look(key)
	if !e.Set {
		return f
	}
	f.Set = true
	v, ok := ParseBool(e.Value)
	if !ok {
		f.Invalid = true
		m.note(key, Invalid, strconv.Quote(e.Value)+" is not a boolean to YuniKorn 1.9 (strconv.ParseBool: 1, t, T, TRUE, true, True, 0, f, F, "+
			"FALSE, false, False): it logs an error and runs with its default "+strconv.FormatBool(def)+", which migrate writes as "+
			setting+": "+strconv.FormatBool(def)+" (followYuniKornConfig keeps the value last read instead)")
		return f
	}
	f.Bool = v
	m.note(key, Mapped, strconv.Quote(e.Value)+" -> "+setting+": "+strconv.FormatBool(v)+e.From)
	return f
}

// List maps a YuniKorn pattern list.
func (m *Mapper) List(key, setting, def string) Field {
	d, _ := Split(def)
	f := Field{Key: key, Setting: setting, List: true, Patterns: d.Patterns}
	e := m.Look(key)
	if !e.Set {
		return f
	}
	f.Set = true
	p, err := Split(e.Value)
	if err != "" {
		f.Invalid = true
		m.note(key, Invalid, "YuniKorn 1.9 cannot compile "+err+": it logs an error and runs with its default "+QuoteList(d.Patterns)+
			", which migrate writes as "+setting+" (followYuniKornConfig keeps the value last read instead). Fix the value: "+
			"this policy refuses a pattern that does not compile")
		return f
	}
	f.Patterns = p.Patterns
	m.note(key, Mapped, strconv.Quote(e.Value)+" -> "+setting+": "+QuoteList(p.Patterns)+e.From)
	if p.Empty > 0 {
		m.note(key, Differs, "YuniKorn skips "+strconv.Itoa(p.Empty)+" empty piece(s) (a stray or trailing comma); the output leaves them out, "+
			"since this policy refuses an empty pattern (it would match every name)")
	}
	for _, piece := range p.Patterns {
		if !Balanced(piece) {
			m.note(key, Differs, "piece "+strconv.Quote(piece)+" does not close its brackets: YuniKorn splits at every comma, also one inside "+
				"{m,n}, [...] or (...), and runs with the pieces as separate patterns, which the output keeps. If one pattern "+
				"was meant, write it as one entry of the list")
		}
	}
	return f
}

// ParseBool reads a boolean as YuniKorn does (strconv.ParseBool); ok is
// false for a value it cannot use.
func ParseBool(value string) (v, ok bool) {
	v, err := strconv.ParseBool(value)
	return v, err == nil
}

// Pieces is a pattern list as YuniKorn splits it.
type Pieces struct {
	Patterns []string
	Empty    int // empty pieces skipped
}

// Split parses a pattern list as the k8shim's parseRegexes: split at every
// comma, trim, skip empty pieces, compile each. err names the piece that
// does not compile and why ("" when all do).
func Split(value string) (Pieces, string) {
	p := Pieces{Patterns: []string{}}
	for _, piece := range strings.Split(value, ",") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			if strings.TrimSpace(value) != "" {
				p.Empty++
			}
			continue
		}
		if _, err := boundedre.Compile(piece); err != nil {
			return Pieces{}, "piece " + strconv.Quote(piece) + " (" + err.Error() + ")"
		}
		p.Patterns = append(p.Patterns, piece)
	}
	return p, ""
}

// Balanced reports whether a pattern closes the brackets, braces and
// parentheses it opens, ignoring escaped characters.
func Balanced(p string) bool {
	var sq, cu, pa int
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			sq++
		case '{':
			cu++
		case '(':
			pa++
		case ']':
			sq--
		case '}':
			cu--
		case ')':
			pa--
		}
	}
	return sq == 0 && cu == 0 && pa == 0
}

// QuoteList writes patterns as ["a", "b"].
func QuoteList(ps []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(p))
	}
	b.WriteByte(']')
	return b.String()
}
