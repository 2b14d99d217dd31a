package yunikorn

import (
	"sync"
	"testing"
	"time"
	_ "unsafe" // go:linkname, to read yunikorn-core's own completingTimeout

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corecommon "github.com/apache/yunikorn-core/pkg/common"
	"github.com/apache/yunikorn-core/pkg/entrypoint"
	corelog "github.com/apache/yunikorn-core/pkg/log"
	"github.com/apache/yunikorn-core/pkg/scheduler"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-k8shim/pkg/cache"
	"github.com/apache/yunikorn-k8shim/pkg/client"
	"github.com/apache/yunikorn-k8shim/pkg/common/events"
	"github.com/apache/yunikorn-k8shim/pkg/common/utils"
	shimconf "github.com/apache/yunikorn-k8shim/pkg/conf"
	"github.com/apache/yunikorn-k8shim/pkg/dispatcher"
	shimlog "github.com/apache/yunikorn-k8shim/pkg/log"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

// coreCompletingTimeout is yunikorn-core v1.9.0's own completingTimeout
// (pkg/scheduler/objects), read from the core rather than restated: how
// long it keeps an application Completing after its last allocation went.
//
//go:linkname coreCompletingTimeout github.com/apache/yunikorn-core/pkg/scheduler/objects.completingTimeout
var coreCompletingTimeout time.Duration

// coreDefaultCompletingTimeout is the core's value before any test
// shortened it.
var coreDefaultCompletingTimeout = coreCompletingTimeout

// yunikorn is k8shim v1.9.0's cache.Context wired to yunikorn-core v1.9.0
// running in-process, as k8shim's KubernetesShim wires them (its
// constructor is not exported; the steps are its Run's): the dispatcher
// with the context's application and task handlers, the core's RM proxy as
// the scheduler API, the shim registered as a resource manager, the
// context's state initialised, and the scheduling loop that submits each
// application's tasks to the core. Kubernetes is the mocked API provider:
// the test feeds Pod events to the context and reads the bindings the
// shim makes.
type yunikorn struct {
	ctx       *cache.Context
	api       *client.MockedAPIProvider
	core      *entrypoint.ServiceContext
	partition string
	stop      chan struct{}
	done      sync.WaitGroup
}

// Handler names as KubernetesShim registers them, so the context's
// handlers replace any left by another test in this process.
const (
	shimAppHandler  = "ShimAppHandler"
	shimTaskHandler = "ShimTaskHandler"
)

// startYuniKorn starts the core and the shim with generateUniqueAppIds as
// given and one node, and stops them at cleanup.
func startYuniKorn(t *testing.T, unique bool) *yunikorn {
	t.Helper()
	c := shimconf.GetSchedulerConf().Clone()
	c.GenerateUniqueAppIds = unique
	shimconf.SetSchedulerConf(c)

	// Their INFO lines (thousands a sequence, stack traces at shutdown)
	// would bury the test's own.
	quiet := map[string]string{"log.level": "ERROR"}
	corelog.UpdateLoggingConfig(quiet)
	shimlog.UpdateLoggingConfig(quiet)
	core := entrypoint.StartAllServicesWithParams(false, false) // no REST listener
	api := client.NewMockedAPIProvider(false)
	api.GetAPIs().SchedulerAPI = core.RMProxy
	events.SetRecorder(events.NewMockedRecorder())
	ctx := cache.NewContext(api)
	callback := cache.NewAsyncRMCallback(ctx)
	dispatcher.RegisterEventHandler(shimAppHandler, dispatcher.EventTypeApp, ctx.ApplicationEventHandler())
	dispatcher.RegisterEventHandler(shimTaskHandler, dispatcher.EventTypeTask, ctx.TaskEventHandler())
	y := &yunikorn{ctx: ctx, api: api, core: core, stop: make(chan struct{}),
		partition: corecommon.GetNormalizedPartitionName("default", shimconf.GetSchedulerConf().ClusterID)}
	t.Cleanup(y.shutdown)

	api.RunEventHandler()
	dispatcher.Start()
	conf := shimconf.GetSchedulerConf()
	if _, err := core.RMProxy.RegisterResourceManager(&si.RegisterResourceManagerRequest{
		RmID: conf.ClusterID, Version: conf.ClusterVersion, PolicyGroup: conf.PolicyGroup,
		BuildInfo: shimconf.GetBuildInfoMap(), Config: coreConfig, ExtraConfig: quiet,
	}, callback); err != nil {
		t.Fatalf("registering the shim with the core: %v", err)
	}
	if err := ctx.InitializeState(); err != nil {
		t.Fatalf("initialising the shim's state: %v", err)
	}
	y.done.Add(1)
	go func() { // KubernetesShim.schedule, more often than its 1 s
		defer y.done.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-y.stop:
				return
			case <-tick.C:
				for _, app := range ctx.GetAllApplications() {
					if app.GetApplicationState() == cache.ApplicationStates().Failed {
						if app.AreAllTasksTerminated() {
							ctx.RemoveApplication(app.GetApplicationID())
						}
						continue
					}
					app.Schedule()
				}
			}
		}
	}()

	api.AddNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-1"},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000"), v1.ResourceMemory: resource.MustParse("1000Gi"),
				v1.ResourcePods: resource.MustParse("10000")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000"), v1.ResourceMemory: resource.MustParse("1000Gi"),
				v1.ResourcePods: resource.MustParse("10000")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	})
	if err := utils.WaitForCondition(func() bool {
		p := y.partitionContext()
		return p != nil && p.GetTotalNodeCount() == 1
	}, 10*time.Millisecond, 10*time.Second); err != nil {
		t.Fatalf("the core has no node: %v", err)
	}
	return y
}

// coreConfig is one queue every user may submit to, where every
// application is placed.
const coreConfig = `
partitions:
  - name: default
    placementrules:
      - name: fixed
        value: root.default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
`

func (y *yunikorn) partitionContext() *scheduler.PartitionContext {
	return y.core.Scheduler.GetClusterContext().GetPartition(y.partition)
}

// coreApp is the core's application appID, live or completed last.
func (y *yunikorn) coreApp(appID string) *objects.Application {
	p := y.partitionContext()
	if app := p.GetApplication(appID); app != nil {
		return app
	}
	return nil
}

func (y *yunikorn) shutdown() {
	close(y.stop)
	y.done.Wait()
	dispatcher.Stop()
	dispatcher.UnregisterEventHandler(shimAppHandler, dispatcher.EventTypeApp)
	dispatcher.UnregisterEventHandler(shimTaskHandler, dispatcher.EventTypeTask)
	y.api.Stop()
	y.core.StopAll()
}
