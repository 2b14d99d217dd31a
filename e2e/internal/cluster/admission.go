package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// What YuniKorn's admission controller (k8shim v1.9.0 pkg/cmd/admissioncontroller,
// pkg/admission/webhook_manager.go) names and where it listens.
const (
	// YKMutations and YKValidations are the webhook configurations its
	// webhook manager creates (cluster-scoped, fixed names).
	YKMutations   = "yunikorn-admission-controller-mutations"
	YKValidations = "yunikorn-admission-controller-validations"
	// YKMutatePodsWebhook and YKValidateConfWebhook are the webhooks in
	// them, as the API server names them in a refusal.
	YKMutatePodsWebhook   = "admission-webhook.yunikorn.mutate-pods"
	YKValidateConfWebhook = "admission-webhook.yunikorn.validate-conf"
	// YKSecret is the Secret of its namespace where it keeps its two CA
	// certificates and keys; it must exist (empty), it fills it.
	YKSecret = "admission-controller-secrets"
	// YKServiceName is its default admissionController.webHook.amServiceName:
	// the Service its webhook configurations reference (port 443, path
	// /mutate and /validate-conf) and its certificate names.
	YKServiceName = "yunikorn-admission-controller-service"
	// ykPort is its fixed HTTPS port, on every interface (":9089").
	ykPort = 9089
	// YKSchedulerServiceAddress is where, inside its network namespace,
	// the scheduler's REST API is forwarded: the value to give
	// admissionController.webHook.schedulerServiceAddress (its default,
	// yunikorn-service:9080, is a cluster DNS name).
	YKSchedulerServiceAddress = "127.0.0.1:9080"
)

// AdmissionControllerOptions configure StartAdmissionController.
type AdmissionControllerOptions struct {
	// Name names the process and its log. Default: yunikorn-admission-controller.
	Name string
	// Binary is the admission controller (kbuild.EnsureAdmissionController).
	// Required.
	Binary string
	// Namespace is its NAMESPACE: where it reads yunikorn-defaults and
	// yunikorn-configs, keeps YKSecret, and where its Service is. Required;
	// the caller creates YKSecret there and grants its identity k8shim's
	// admission controller RBAC.
	Namespace string
	// Kubeconfig is its KUBECONFIG (its service account's token, say).
	// Required.
	Kubeconfig string
	// Admin is a client allowed to edit webhook configurations and create
	// Services. Required.
	Admin kubernetes.Interface
	// NamespaceSelector confines its two webhooks to the test's namespaces
	// (it installs them for every namespace). Required.
	NamespaceSelector *metav1.LabelSelector
	// SchedulerRESTAddr is the scheduler's REST address (host:port on the
	// machine's loopback), forwarded to YKSchedulerServiceAddress inside
	// the controller's network namespace. Optional.
	SchedulerRESTAddr string
}

// YKAdmissionController is a running YuniKorn admission controller.
//
// It runs unmodified in a network namespace of its own (it listens on
// ":9089", every interface, with no option to change it): its only
// interface is loopback, with the API server's address forwarded in, so
// its client reaches the API server at the kubeconfig's own address. The
// API server reaches it as it does in a cluster: through the Service
// reference the controller writes into its webhook configurations. That
// Service is an ExternalName Service whose name is a loopback address of
// the machine, where a forwarder stands for the Service's port 443 and
// carries each connection to port 9089 in the namespace, as kube-proxy
// carries a Service's port to a Pod's. The API server resolves the
// reference with its own resolver, verifies the controller's certificate
// against the CA bundle the controller installed, for the name
// <service>.<namespace>.svc, and speaks HTTP/1.1, as it does to any
// Service.
type YKAdmissionController struct {
	Process *Process
	NetNS   *NetNS
	// ServiceAddr is the loopback host:port the Service resolves to.
	ServiceAddr string
	// Service is the forwarder behind ServiceAddr; its counts tell how
	// often the API server called the controller.
	Service *Forwarder

	opts  AdmissionControllerOptions
	inner []*Forwarder // inside the namespace: the API server, the scheduler
	once  sync.Once
	err   error
}

// StartAdmissionController starts YuniKorn's admission controller, waits
// until it has made its certificates, installed its webhook configurations
// and serves /health, confines those configurations to
// opts.NamespaceSelector, and only then creates the Service that lets the
// API server call it. Before that the configurations exist but their
// Service does not, so the API server cannot call the controller and,
// with its failurePolicy Ignore, admits as if it were absent: the rest of
// the suite never meets it.
//
// The selector is the one change made to what the controller installs. Its
// webhook manager does not fight it: it compares its configurations with
// what it would write only when it starts and when its certificates are
// renewed (months away), and that comparison (checkMutatingWebhook,
// checkValidatingWebhook) does not look at namespaceSelector.
func (c *Cluster) StartAdmissionController(ctx context.Context, opts AdmissionControllerOptions) (_ *YKAdmissionController, err error) {
	if opts.Binary == "" || opts.Namespace == "" || opts.Kubeconfig == "" || opts.Admin == nil || opts.NamespaceSelector == nil {
		return nil, errors.New("start the admission controller: binary, namespace, kubeconfig, admin client and namespace selector are required")
	}
	if opts.Name == "" {
		opts.Name = "yunikorn-admission-controller"
	}
	ac := &YKAdmissionController{opts: opts}
	defer func() {
		if err != nil {
			// Whatever it installed goes too.
			err = errors.Join(err, ac.Remove(context.WithoutCancel(ctx)))
		}
	}()
	if ac.NetNS, err = NewNetNS(); err != nil {
		return nil, fmt.Errorf("start the admission controller: %w", err)
	}

	// The API server, at the very address the kubeconfig names.
	api, err := url.Parse(c.Server)
	if err != nil {
		return nil, fmt.Errorf("start the admission controller: parse the server URL: %w", err)
	}
	if err := ac.forwardIn(api.Host, api.Host); err != nil {
		return nil, err
	}
	if opts.SchedulerRESTAddr != "" {
		if err := ac.forwardIn(YKSchedulerServiceAddress, opts.SchedulerRESTAddr); err != nil {
			return nil, err
		}
	}

	ac.Process = c.track(&Process{
		Name: opts.Name, Path: opts.Binary, NetNS: ac.NetNS,
		Env: []string{"KUBECONFIG=" + opts.Kubeconfig, "NAMESPACE=" + opts.Namespace},
	})
	if err := ac.Process.start(); err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, ac.Process, "YuniKorn's admission controller /health", ac.healthy); err != nil {
		return nil, err
	}
	if err := ac.confine(ctx); err != nil {
		return nil, err
	}
	if err := ac.expose(ctx); err != nil {
		return nil, err
	}
	return ac, nil
}

// forwardIn listens on inside (an address in the controller's namespace)
// and forwards to outside (an address on the machine's loopback).
func (ac *YKAdmissionController) forwardIn(inside, outside string) error {
	ln, err := ac.NetNS.Listen(inside)
	if err != nil {
		return fmt.Errorf("start the admission controller: %w", err)
	}
	ac.inner = append(ac.inner, Forward(ln, func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		return d.DialContext(ctx, "tcp", outside)
	}))
	return nil
}

// dialController connects to the controller's port in its namespace.
func (ac *YKAdmissionController) dialController(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return ac.NetNS.DialContext(ctx, "127.0.0.1:"+strconv.Itoa(ykPort))
}

// serverName is the name the API server verifies the controller's
// certificate for (k8s.io/apiserver pkg/util/webhook: <service>.<namespace>.svc).
func (ac *YKAdmissionController) serverName() string {
	return YKServiceName + "." + ac.opts.Namespace + ".svc"
}

// healthy asks the controller's /health in its namespace, verifying its
// certificate as the API server will: against the CA certificates it keeps
// in YKSecret, for serverName.
func (ac *YKAdmissionController) healthy(ctx context.Context) error {
	secret, err := ac.opts.Admin.CoreV1().Secrets(ac.opts.Namespace).Get(ctx, YKSecret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	for _, k := range []string{"cacert1.pem", "cacert2.pem"} {
		if !pool.AppendCertsFromPEM(secret.Data[k]) {
			return fmt.Errorf("secret %s has no CA certificate %s yet", YKSecret, k)
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return ac.dialController(ctx) },
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: ac.serverName(), MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	return getOK(ctx, hc, "https://"+ac.serverName()+"/health", "")
}

// confine adds opts.NamespaceSelector to the two configurations the
// controller installed, after checking they reference its Service.
func (ac *YKAdmissionController) confine(ctx context.Context) error {
	admission := ac.opts.Admin.AdmissionregistrationV1()
	check := func(name string, cc admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Name != YKServiceName || cc.Service.Namespace != ac.opts.Namespace || cc.URL != nil {
			return fmt.Errorf("webhook configuration %s: the controller installed clientConfig %+v, want service %s/%s", name, cc, ac.opts.Namespace, YKServiceName)
		}
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := admission.MutatingWebhookConfigurations().Get(ctx, YKMutations, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(m.Webhooks) != 1 {
			return fmt.Errorf("webhook configuration %s has %d webhooks, want 1", YKMutations, len(m.Webhooks))
		}
		if err := check(YKMutations, m.Webhooks[0].ClientConfig); err != nil {
			return err
		}
		m.Webhooks[0].NamespaceSelector = ac.opts.NamespaceSelector.DeepCopy()
		_, err = admission.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("confine %s: %w", YKMutations, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := admission.ValidatingWebhookConfigurations().Get(ctx, YKValidations, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(v.Webhooks) != 1 {
			return fmt.Errorf("webhook configuration %s has %d webhooks, want 1", YKValidations, len(v.Webhooks))
		}
		if err := check(YKValidations, v.Webhooks[0].ClientConfig); err != nil {
			return err
		}
		v.Webhooks[0].NamespaceSelector = ac.opts.NamespaceSelector.DeepCopy()
		_, err = admission.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("confine %s: %w", YKValidations, err)
	}
	return nil
}

// expose listens on a loopback address of its own, port 443 (the port a
// service reference without one means), forwarding to the controller's
// 9089, and creates the Service, an ExternalName naming that address.
func (ac *YKAdmissionController) expose(ctx context.Context) error {
	var ln net.Listener
	var err error
	// An address of 127.0.0.0/8 that nothing else uses: port 443 is
	// fixed, so the address is what is picked.
	for range 20 {
		ip := net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip.String(), "443")); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("listen for the admission controller's Service: %w", err)
	}
	ac.ServiceAddr = ln.Addr().String()
	ac.Service = Forward(ln, ac.dialController)
	host, _, _ := net.SplitHostPort(ac.ServiceAddr)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: YKServiceName, Labels: map[string]string{"app": "yunikorn-admission-controller-service"}},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: host,
			Ports:        []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(ykPort)}},
		},
	}
	if _, err := ac.opts.Admin.CoreV1().Services(ac.opts.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the admission controller's Service: %w", err)
	}
	return nil
}

// Remove uninstalls the controller as an operator would: the process
// stops, and its Service and the two webhook configurations it installed
// (which it never deletes itself) are deleted. Safe to call twice.
func (ac *YKAdmissionController) Remove(ctx context.Context) error {
	ac.once.Do(func() {
		var errs []error
		errs = append(errs, ac.stop())
		admission := ac.opts.Admin.AdmissionregistrationV1()
		ignoreGone := func(err error) error {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		errs = append(errs,
			ignoreGone(admission.MutatingWebhookConfigurations().Delete(ctx, YKMutations, metav1.DeleteOptions{})),
			ignoreGone(admission.ValidatingWebhookConfigurations().Delete(ctx, YKValidations, metav1.DeleteOptions{})),
			ignoreGone(ac.opts.Admin.CoreV1().Services(ac.opts.Namespace).Delete(ctx, YKServiceName, metav1.DeleteOptions{})))
		ac.err = errors.Join(errs...)
	})
	return ac.err
}

// stop ends the process, the forwarders and the namespace.
func (ac *YKAdmissionController) stop() error {
	var errs []error
	if ac.Process != nil {
		errs = append(errs, ac.Process.Stop(10*time.Second))
	}
	if ac.Service != nil {
		errs = append(errs, ac.Service.Close())
	}
	for _, f := range ac.inner {
		errs = append(errs, f.Close())
	}
	if ac.NetNS != nil {
		errs = append(errs, ac.NetNS.Close())
	}
	return errors.Join(errs...)
}
