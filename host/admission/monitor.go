package admission

import (
	"maps"
	"strconv"
	"unicode/utf8"
)

// MonitorWarningPrefix starts the warning of a refusal admitted in monitor
// mode; the refusal's message follows.
const MonitorWarningPrefix = "monitor mode: would be refused: "

// AuditMonitor is the audit annotation key Monitor adds to a refusal it
// admits, with the value AuditMonitorWouldRefuse. The API server prefixes
// the key with the webhook's name and a slash.
const (
	AuditMonitor            = "monitor"
	AuditMonitorWouldRefuse = "would be refused"
)

// maxMonitorMessage bounds the refusal message copied into the warning.
// The API server shortens warnings too (to 4 KiB for all of a response's
// warnings together), but this keeps a guest's huge message from being
// copied at all.
const maxMonitorMessage = 2048

// Monitor is resp as monitor mode answers it: a response that allows the
// request is returned unchanged, patch included; a refusal, from the
// policy or from a failed evaluation, becomes an admission of the object
// as it was sent (no patch, no status: a refused request's mutation must
// not be applied), with the policy's warnings and audit annotations kept,
// the warning MonitorWarningPrefix + the refusal's message added, and the
// audit annotation AuditMonitor set. It reports whether it turned a
// refusal into an admission. resp is not changed.
func Monitor(resp *Response) (*Response, bool) {
	if resp.Allowed {
		return resp, false
	}
	msg := "the policy refused the request"
	if resp.Status != nil && resp.Status.Message != "" {
		msg = resp.Status.Message
	}
	if resp.Status != nil && resp.Status.Code != 0 {
		msg += " (code " + strconv.Itoa(int(resp.Status.Code)) + ")"
	}
	out := &Response{
		UID:              resp.UID,
		Allowed:          true,
		Warnings:         append(append(make([]string, 0, len(resp.Warnings)+1), resp.Warnings...), MonitorWarningPrefix+clipText(msg, maxMonitorMessage)),
		AuditAnnotations: maps.Clone(resp.AuditAnnotations),
	}
	if out.AuditAnnotations == nil {
		out.AuditAnnotations = map[string]string{}
	}
	out.AuditAnnotations[AuditMonitor] = AuditMonitorWouldRefuse
	return out, true
}

// clipText cuts s to at most n bytes on a character boundary, saying how long
// it was.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
