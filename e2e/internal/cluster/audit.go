package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditLogFile is the API server's audit log inside the run directory.
const auditLogFile = "kube-apiserver-audit.log"

// AuditEvent is what the scenarios read of one audit event
// (audit.k8s.io/v1 Event): which request a user made and how the API
// server answered it.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
}

// Code is the response's status code, 0 when the event has none.
func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// auditFlags writes the audit policy, which records the requests of
// Options.AuditUsers only (level Metadata: no bodies), and returns the API
// server's audit flags; none when no user is audited.
func (c *Cluster) auditFlags() ([]string, error) {
	if len(c.opts.AuditUsers) == 0 && len(c.opts.AuditRequestUsers) == 0 {
		return nil, nil
	}
	policy := `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
`
	for _, r := range []struct {
		level string
		users []string
	}{{"Request", c.opts.AuditRequestUsers}, {"Metadata", c.opts.AuditUsers}} {
		if len(r.users) == 0 {
			continue
		}
		users, err := json.Marshal(r.users)
		if err != nil {
			return nil, fmt.Errorf("write the audit policy: %w", err)
		}
		policy += "  - level: " + r.level + "\n    users: " + string(users) + "\n"
	}
	policy += "  - level: None\n"
	path := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		return nil, fmt.Errorf("write the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file", path,
		"--audit-log-path", filepath.Join(c.Dir, auditLogFile),
		"--audit-log-format", "json",
		// Each event is written before the request completes: a scenario
		// reads what it caused without waiting for a batch.
		"--audit-log-mode", "blocking",
	}, nil
}

// AuditLogPath is the API server's audit log (--audit-log-path), written
// when Options.AuditUsers is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.Dir, auditLogFile) }

// AuditEvents returns the audit events of user's requests so far, in the
// order the API server wrote them. The user must be in Options.AuditUsers.
func (c *Cluster) AuditEvents(user string) ([]AuditEvent, error) {
	found := false
	for _, u := range c.opts.AuditUsers {
		found = found || u == user
	}
	if !found {
		return nil, fmt.Errorf("audit events of %s: not an audited user (cluster.Options.AuditUsers)", user)
	}
	data, err := os.ReadFile(filepath.Join(c.Dir, auditLogFile))
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	var events []AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("read the audit log: line %d: %w", n, err)
		}
		if e.User.Username == user {
			events = append(events, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return events, nil
}
