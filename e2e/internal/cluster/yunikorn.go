package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SchedulerOptions configure StartScheduler.
type SchedulerOptions struct {
	// Binary is the YuniKorn scheduler (kbuild.EnsureScheduler). Required.
	Binary string
	// User is the static-token user it authenticates as; the caller grants
	// it the scheduler's RBAC. Required.
	User string
	// Namespace is where it reads its yunikorn-configs ConfigMap. Required.
	Namespace string
	// RESTAddrEnv is the variable the binary reads its REST address from
	// (kbuild.RESTAddrEnv). Required.
	RESTAddrEnv string
}

// Scheduler is a running YuniKorn scheduler (the Kubernetes shim with its
// core), on the cluster's loopback API server, with its REST API on a free
// loopback port.
type Scheduler struct {
	Process *Process
	// URL is the base of its REST API.
	URL string
	hc  *http.Client
}

// StartScheduler starts YuniKorn and waits until its REST API reports a
// healthy scheduler.
func (c *Cluster) StartScheduler(ctx context.Context, opts SchedulerOptions) (*Scheduler, error) {
	if opts.Binary == "" || opts.User == "" || opts.Namespace == "" || opts.RESTAddrEnv == "" {
		return nil, errors.New("start the scheduler: binary, user, namespace and REST address variable are required")
	}
	kubeconfig, err := c.writeKubeconfig("yunikorn-scheduler", opts.User)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p := c.track(&Process{
		Name: "yunikorn-scheduler", Path: opts.Binary,
		Env: []string{"KUBECONFIG=" + kubeconfig, "NAMESPACE=" + opts.Namespace, opts.RESTAddrEnv + "=" + addr},
	})
	if err := p.start(); err != nil {
		return nil, err
	}
	s := &Scheduler{Process: p, URL: "http://" + addr, hc: &http.Client{Timeout: 5 * time.Second}}
	if err := c.waitHealthy(ctx, p, "the YuniKorn scheduler", func(ctx context.Context) error {
		var health struct {
			Healthy bool `json:"Healthy"`
		}
		if err := s.get(ctx, "/ws/v1/scheduler/healthcheck", &health); err != nil {
			return err
		}
		if !health.Healthy {
			return errors.New("not healthy yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Application is what YuniKorn's REST API reports of an application.
type Application struct {
	ApplicationID   string   `json:"applicationID"`
	QueueName       string   `json:"queueName"`
	State           string   `json:"applicationState"`
	User            string   `json:"user"`
	Groups          []string `json:"groups"`
	RejectedMessage string   `json:"rejectedMessage"`
	Allocations     []struct {
		NodeID string `json:"nodeId"`
		// PlaceholderUsed: the allocation replaced a gang placeholder.
		PlaceholderUsed bool   `json:"placeholderUsed"`
		TaskGroupName   string `json:"taskGroupName"`
	} `json:"allocations"`
	// PlaceholderData counts, per task group, the gang placeholders and
	// how many of them real Pods replaced.
	PlaceholderData []struct {
		TaskGroupName string `json:"taskGroupName"`
		Count         int64  `json:"count"`
		Replaced      int64  `json:"replaced"`
		TimedOut      int64  `json:"timedout"`
	} `json:"placeholderData"`
}

// Application returns the application id in the default partition.
func (s *Scheduler) Application(ctx context.Context, id string) (Application, error) {
	var app Application
	err := s.get(ctx, "/ws/v1/partition/default/application/"+url.PathEscape(id), &app)
	return app, err
}

// QueueUsage is YuniKorn's account of one user in one queue and below.
type QueueUsage struct {
	QueuePath           string           `json:"queuePath"`
	ResourceUsage       map[string]int64 `json:"resourceUsage"`
	RunningApplications []string         `json:"runningApplications"`
	MaxResources        map[string]int64 `json:"maxResources"`
	MaxApplications     uint64           `json:"maxApplications"`
	Children            []QueueUsage     `json:"children"`
}

// UserUsage is what YuniKorn tracks of a user: the usage counted against
// per-user limits.
type UserUsage struct {
	UserName string      `json:"userName"`
	Queues   *QueueUsage `json:"queues"`
}

// UserUsage returns the usage YuniKorn tracks for user in the default
// partition.
func (s *Scheduler) UserUsage(ctx context.Context, user string) (UserUsage, error) {
	var u UserUsage
	err := s.get(ctx, "/ws/v1/partition/default/usage/user/"+url.PathEscape(user), &u)
	return u, err
}

// RejectedApplications lists the applications YuniKorn rejected.
func (s *Scheduler) RejectedApplications(ctx context.Context) ([]Application, error) {
	var apps []Application
	err := s.get(ctx, "/ws/v1/partition/default/applications/rejected", &apps)
	return apps, err
}

// get decodes the JSON answer of a REST API path.
func (s *Scheduler) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.300s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}
