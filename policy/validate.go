package main

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// validate is the waPC "validate" operation: a Kubewarden ValidationRequest
// ({"request": AdmissionRequest, "settings": {...}}) in, a ValidationResponse
// out. Every input yields a response; nothing here returns an error, since
// an error would be reported as a broken policy rather than a bad request.
func validate(payload []byte) ([]byte, error) {
	return appendValidate(nil, payload), nil
}

// appendValidate is validate appending its response to dst.
func appendValidate(dst, payload []byte) []byte {
	// The payload's index serves the evaluation and the writing of the
	// mutated object, which reads the same objects.
	indexed.Lock()
	defer indexed.release()
	d := evaluate(payload)
	logDecision(d)
	return d.appendResponse(dst)
}

// payloadFields are the members of a ValidationRequest.
var payloadFields = []string{"settings", "request"}

func evaluate(payload []byte) decision {
	// A view of the payload, not a copy: the payload is not changed while
	// the call runs, and nothing that outlives the call points into it.
	doc := unsafe.String(unsafe.SliceData(payload), len(payload))
	// One pass validates the payload, bounds its depth and indexes it.
	if !indexed.index(doc, maxPayloadDepth) {
		if where, deep := tooDeep(doc, maxPayloadDepth); deep {
			return reject("malformed", codeMalformed, where+": JSON nests deeper than "+strconv.Itoa(maxPayloadDepth)+" levels")
		}
		return reject("malformed", codeMalformed, "payload: not valid JSON")
	}
	root := gjson.Parse(doc)
	if !isObject(root) {
		return reject("malformed", codeMalformed, "payload: must be an object, got "+typeName(root))
	}
	var f [2]gjson.Result
	if err := members(root, "", payloadFields, f[:]); err != nil {
		return rejectInput(err)
	}
	rawSettings, req := f[0], f[1]
	s, err := cachedSettings(rawSettings)
	if err != nil {
		return reject("malformed", codeMalformed, "settings are not valid: "+err.Error())
	}
	if !req.Exists() {
		return rejectInput(malformed("request", "missing"))
	}
	if s.Follow == nil {
		return decide(req, s)
	}
	eff, warnings := followed(s)
	d := decide(req, eff)
	if len(warnings) > 0 {
		d.warnings = append(d.warnings, warnings...)
	}
	return d
}

// validateSettings is the waPC "validate_settings" operation: the raw
// settings object in, {"valid":bool,"message":...} out.
func validateSettings(payload []byte) ([]byte, error) {
	if where, deep := tooDeep(string(payload), maxPayloadDepth); deep {
		field := "settings"
		if where != "" {
			field += "." + where
		}
		return settingsResponse(field + ": JSON nests deeper than " + strconv.Itoa(maxPayloadDepth) + " levels"), nil
	}
	if !gjson.ValidBytes(payload) {
		return settingsResponse("settings: not valid JSON"), nil
	}
	s, err := parseSettings(gjson.ParseBytes(payload))
	if err != nil {
		return settingsResponse(err.Error()), nil
	}
	// The protocol has no warnings here: valid settings with a message,
	// which hosts log. Warnings come first, after "warning: "; notes on
	// their own line, after "note: ".
	var remark []string
	if len(s.Warnings) > 0 {
		remark = append(remark, "warning: "+strings.Join(s.Warnings, "; "))
	}
	if len(s.Notes) > 0 {
		remark = append(remark, "note: "+strings.Join(s.Notes, "; "))
	}
	if len(remark) > 0 {
		b := append([]byte(nil), `{"valid":true,"message":`...)
		b = appendJSONString(b, strings.Join(remark, "\n"))
		return append(b, '}'), nil
	}
	return settingsResponse(""), nil
}

func settingsResponse(problem string) []byte {
	if problem == "" {
		return []byte(`{"valid":true}`)
	}
	b := append([]byte(nil), `{"valid":false,"message":`...)
	b = appendJSONString(b, problem)
	return append(b, '}')
}

// The settings of a policy are the same on every request, and compiling its
// regular expressions dominates an evaluation, so the last parsed settings
// are kept, keyed by their raw JSON. The mutex costs nothing in the
// single-threaded guest and keeps native tests race-free.
var settingsCache struct {
	sync.Mutex
	raw      string
	settings *Settings
	err      error
	valid    bool
}

func cachedSettings(raw gjson.Result) (*Settings, error) {
	settingsCache.Lock()
	defer settingsCache.Unlock()
	if settingsCache.valid && settingsCache.raw == raw.Raw {
		return settingsCache.settings, settingsCache.err
	}
	// raw is a view of a payload that the caller reuses once the call
	// returns (the Wasm entry point keeps one buffer for every call), and
	// the parsed settings hold views of what they were parsed from: both
	// are made from a copy that the cache owns.
	own := strings.Clone(raw.Raw)
	s, err := parseSettings(gjson.Parse(own))
	settingsCache.raw, settingsCache.settings, settingsCache.err, settingsCache.valid = own, s, err, true
	return s, err
}

// appendResponse writes the ValidationResponse. It is built by hand rather
// than with policy-sdk-go's helpers because the SDK's response type has no
// "warnings", and because the mutated object must be embedded byte for byte.
func (d decision) appendResponse(b []byte) []byte {
	if d.accepted {
		b = append(b, `{"accepted":true`...)
	} else {
		b = append(b, `{"accepted":false`...)
	}
	if d.message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, d.message)
	}
	if d.code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(d.code), 10)
	}
	switch {
	case d.sched != nil:
		// The scheduling jobs' edits, user.info's included, were made
		// once, for the checks that read the Pod as it is admitted.
		b = append(b, `,"mutated_object":`...)
		b = append(b, d.sched.text...)
	case d.mutation != nil:
		// The mutated object is written straight into the response: no
		// copy of the object is made on its own.
		b = append(b, `,"mutated_object":`...)
		b = appendMutated(b, d.mutation)
	}
	if len(d.warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range d.warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, w)
		}
		b = append(b, ']')
	}
	b = d.appendAuditAnnotations(b)
	return append(b, '}')
}

// maxAuditValue is the most of one value an audit annotation carries: the
// API server stores audit annotations with every audit event of the
// request, and a user.info value can be as large as the object's
// annotations. A longer value is cut, saying how long it was.
const maxAuditValue = 1024

// Audit annotation keys; the API server prefixes each with the webhook's
// name and a slash.
const (
	auditRule    = "rule"    // the rule that decided, as the decision trace names it
	auditUser    = "user"    // the user.info value the object records once admitted
	auditClaimed = "claimed" // the user.info value the request supplied
)

// appendAuditAnnotations writes the "audit_annotations" member: the rule
// that decided, always; the identity this admission records (the value
// written by the mutation, or a supplied value accepted as it is); and
// the value the request claimed, when it supplied one the rules judged.
func (d decision) appendAuditAnnotations(b []byte) []byte {
	b = append(b, `,"audit_annotations":{"`+auditRule+`":`...)
	b = appendJSONString(b, clipAudit(d.rule))
	switch {
	case d.mutation != nil:
		// Every edit writes the same value; its token is a JSON string,
		// copied as it is when short enough.
		b = append(b, `,"`+auditUser+`":`...)
		if tok := d.mutation[0].token; len(tok) <= maxAuditValue {
			b = append(b, tok...)
		} else {
			b = appendJSONString(b, clipAudit(str(gjson.Parse(string(tok)))))
		}
	case d.accepted && d.hasClaim:
		b = append(b, `,"`+auditUser+`":`...)
		b = appendJSONString(b, clipAudit(d.claimed))
	}
	if d.hasClaim {
		b = append(b, `,"`+auditClaimed+`":`...)
		b = appendJSONString(b, clipAudit(d.claimed))
	}
	return append(b, '}')
}

// clipAudit cuts s to maxAuditValue bytes, on a character boundary, and
// says how long it was.
func clipAudit(s string) string {
	if len(s) <= maxAuditValue {
		return s
	}
	cut := maxAuditValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
