package check

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const manifests = "../kubernetes"

// objects are the decoded manifests, by kind.
type objects struct {
	services []corev1.Service
	sets     []appsv1.StatefulSet
	pdbs     []policyv1.PodDisruptionBudget
	netpols  []networkingv1.NetworkPolicy
}

// load decodes every document of every manifest strictly: a field the API
// does not have is an error.
func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var o objects
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			var target any
			switch head.APIVersion + " " + head.Kind {
			case "v1 Service":
				o.services = append(o.services, corev1.Service{})
				target = &o.services[len(o.services)-1]
			case "apps/v1 StatefulSet":
				o.sets = append(o.sets, appsv1.StatefulSet{})
				target = &o.sets[len(o.sets)-1]
			case "policy/v1 PodDisruptionBudget":
				o.pdbs = append(o.pdbs, policyv1.PodDisruptionBudget{})
				target = &o.pdbs[len(o.pdbs)-1]
			case "networking.k8s.io/v1 NetworkPolicy":
				o.netpols = append(o.netpols, networkingv1.NetworkPolicy{})
				target = &o.netpols[len(o.netpols)-1]
			default:
				t.Fatalf("%s #%d: unexpected %s %s", f, i, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
				t.Fatalf("%s #%d (%s): %v", f, i, head.Kind, err)
			}
		}
	}
	return o
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestManifestsDecodeStrictly(t *testing.T) {
	o := load(t)
	if len(o.services) != 2 || len(o.sets) != 1 || len(o.pdbs) != 1 || len(o.netpols) != 1 {
		t.Fatalf("%d services, %d statefulsets, %d PDBs, %d network policies; want 2, 1, 1, 1", len(o.services), len(o.sets), len(o.pdbs), len(o.netpols))
	}
	// A field of the wrong name fails: the check is not vacuous.
	bad := []byte("apiVersion: apps/v1\nkind: StatefulSet\nspec:\n  replica: 3\n")
	if err := yaml.UnmarshalStrict(bad, &appsv1.StatefulSet{}); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}

func TestManifestsHoldTogether(t *testing.T) {
	o := load(t)
	set := o.sets[0]
	pod := set.Spec.Template
	c := pod.Spec.Containers[0]
	svc := map[string]corev1.Service{}
	for _, s := range o.services {
		svc[s.Name] = s
	}
	headless, ok := svc[set.Spec.ServiceName]
	if !ok {
		t.Fatalf("serviceName %q is not a service here", set.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Fatal("the headless service must have clusterIP None and publish pods before they are ready (they become ready only once they found each other)")
	}
	// Every service selects the pods and targets a named container port.
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	for _, s := range o.services {
		for k, v := range s.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("service %s selects %s=%s, which the pods lack", s.Name, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			cp, ok := ports[p.TargetPort.StrVal]
			if !ok || cp.Protocol != p.Protocol {
				t.Errorf("service %s port %s targets %q, not a container port of that protocol", s.Name, p.Name, p.TargetPort.StrVal)
			}
		}
	}
	// gossip needs TCP and UDP, each port must match the flags.
	args := strings.Join(c.Args, " ")
	for name, flag := range map[string]string{"grpc": "--grpc-addr", "http": "--http-addr", "raft": "--raft-addr", "gossip-tcp": "--gossip-addr", "gossip-udp": "--gossip-addr"} {
		p, ok := ports[name]
		if !ok {
			t.Fatalf("no container port %s", name)
		}
		if !strings.Contains(args, flag+"=0.0.0.0:"+itoa(p.ContainerPort)) {
			t.Errorf("container port %s (%d) is not where %s listens: %s", name, p.ContainerPort, flag, args)
		}
	}
	// Probes: gRPC health on the client port.
	for name, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr == nil || pr.GRPC == nil || pr.GRPC.Port != ports["grpc"].ContainerPort {
			t.Errorf("%s probe is not gRPC health on the grpc port", name)
		}
	}
	// A start ends before the startup probe gives up: the node exits with
	// its reason, not killed mid-sentence, and waits as long as the probe
	// allows (two minutes by default: pods of a fleet forming while one
	// is pending restarted, backing off, and waited out of step).
	budget := time.Duration(c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold) * time.Second
	start := 2 * time.Minute
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--start-timeout="); ok {
			var err error
			if start, err = time.ParseDuration(v); err != nil {
				t.Fatalf("--start-timeout=%s: %v", v, err)
			}
		}
	}
	if start >= budget || start < budget*3/4 {
		t.Errorf("--start-timeout %s must be a little under the startup probe's %s", start, budget)
	}
	if s := c.ReadinessProbe.GRPC.Service; s == nil || *s != "floodgate.v1.RateLimiter" {
		t.Error("readiness must ask for the RateLimiter service")
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Error("terminationGracePeriodSeconds must leave time for the leadership hand-off (≥ 30s)")
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pods must run as non-root")
	}
	// The same arguments for every pod: bootstrap-expect is the replica count.
	if want := "--bootstrap-expect=" + itoa(*set.Spec.Replicas); !slices.Contains(c.Args, want) {
		t.Errorf("args lack %s", want)
	}
	if !slices.Contains(c.Args, "--join=dns:"+headless.Name+":"+itoa(ports["grpc"].ContainerPort)) {
		t.Errorf("args do not join through the headless service: %v", c.Args)
	}
	if len(set.Spec.VolumeClaimTemplates) != 1 || c.VolumeMounts[0].Name != set.Spec.VolumeClaimTemplates[0].Name {
		t.Error("the data dir must be the volume claim, kept across rescheduling")
	}
	// The PDB keeps a quorum.
	pdb := o.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Error("the PDB must allow at most one pod down")
	}
}

// Pods advertise their stable DNS names for gRPC and Raft: pod IPs change,
// and a cluster whose pods all came back at new IPs at once could not
// re-form at the addresses its meta state holds. Gossip takes the pod IP
// (memberlist takes no name).
func TestPodsAdvertiseStableNames(t *testing.T) {
	set := load(t).sets[0]
	c := set.Spec.Template.Spec.Containers[0]
	env := podEnv(t, c)
	var host, gossip string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--advertise-host="); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(a, "--advertise-gossip-host="); ok {
			gossip = v
		}
	}
	if want := "$(POD_NAME)." + set.Spec.ServiceName + ".$(POD_NAMESPACE).svc.cluster.local"; host != want {
		t.Errorf("--advertise-host=%q, want the pod's stable name %q", host, want)
	}
	if gossip != "$(POD_IP)" || env["POD_IP"] != "10.1.2.3" {
		t.Errorf("--advertise-gossip-host=%q (POD_IP %q), want $(POD_IP) from status.podIP", gossip, env["POD_IP"])
	}
}

// The pods' arguments are ones floodgate accepts: they are checked by the
// real binary, with the pod's environment filled in (--check-config runs
// every check of a start and exits before opening anything).
func TestPodArgumentsParse(t *testing.T) {
	c := load(t).sets[0].Spec.Template.Spec.Containers[0]
	env := podEnv(t, c)
	args := []string{"run", "./cmd/floodgate"}
	for _, a := range c.Args {
		args = append(args, regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				// Kubernetes would pass "$(NAME)" on as it is.
				t.Errorf("argument %q uses %s, which the container's env does not define", a, m)
			}
			return v
		}))
	}
	args = append(args, "--check-config")
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "configuration ok") {
		t.Fatalf("floodgate %v: %v\n%s", args[2:], err, out.String())
	}
	for _, extra := range []string{"--no-such-flag", "--bootstrap-expect=-1"} {
		bad := exec.Command("go", append(args, extra)...)
		bad.Dir = "../.."
		if err := bad.Run(); err == nil {
			t.Fatalf("%s passed: the check is vacuous", extra)
		}
	}
}

// podEnv is the container's environment as a pod floodgate-0 at
// 10.1.2.3 in namespace default sees it: each field reference filled in,
// other sources (secrets, resources) with a placeholder.
func podEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	fields := map[string]string{"metadata.name": "floodgate-0", "metadata.namespace": "default", "status.podIP": "10.1.2.3"}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: field %s unknown to this check", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		default:
			env[e.Name] = "placeholder"
		}
	}
	return env
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Memory: the Go heap's ceiling is the container's limit (GOMEMLIMIT from
// limits.memory), and what --max-state-mib lets each of the replicas a pod
// holds keep in its states fits in half of it; --max-key-states is
// bounded too, its states at the costliest default state (a 60-bucket
// sliding counter, about 300 B; README's figures) within that.
func TestMemoryFitsLimit(t *testing.T) {
	set := load(t).sets[0]
	c := set.Spec.Template.Spec.Containers[0]
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("no memory limit")
	}
	var gomem *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomem = &c.Env[i]
		}
	}
	if gomem == nil || gomem.ValueFrom == nil || gomem.ValueFrom.ResourceFieldRef == nil ||
		gomem.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || gomem.ValueFrom.ResourceFieldRef.Divisor.String() != "1" {
		t.Fatal("GOMEMLIMIT must come from limits.memory in bytes (divisor 1)")
	}
	states, mib := 0, 0
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--max-key-states="); ok {
			states, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(a, "--max-state-mib="); ok {
			mib, _ = strconv.Atoi(v)
		}
	}
	const replicasPerPod, bytesPerState = 3, 300
	if states == 0 || mib == 0 {
		t.Fatal("--max-key-states and --max-state-mib must be bounded in a pod with a memory limit")
	}
	if live := int64(mib) << 20 * replicasPerPod; live > limit.Value()/2 {
		t.Errorf("--max-state-mib=%d: %d replicas x %d MiB = %d MiB live, over half the %s limit", mib, replicasPerPod, mib, live>>20, limit.String())
	}
	if live := int64(states) * bytesPerState; live > int64(mib)<<20 {
		t.Errorf("--max-key-states=%d: %d MiB of sliding counters, over --max-state-mib=%d", states, live>>20, mib)
	}
}

// As shipped: no service account token in the pods (floodgate never calls
// the API), and Raft and gossip reachable from floodgate's own pods only,
// gRPC from them whatever the callers' rule admits, by a policy that
// selects them and names container ports they have.
func TestLockedDown(t *testing.T) {
	o := load(t)
	pod := o.sets[0].Spec.Template
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("automountServiceAccountToken must be false")
	}
	ports := map[string]corev1.Protocol{}
	for _, p := range pod.Spec.Containers[0].Ports {
		ports[p.Name] = p.Protocol
	}
	np := o.netpols[0]
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the network policy selects %s=%s, which the pods lack", k, v)
		}
	}
	reach := map[string]bool{} // port name -> open beyond floodgate's pods
	peers := map[string]bool{} // port name -> admitted by a rule of floodgate's own pods
	for _, r := range np.Spec.Ingress {
		own := len(r.From) > 0
		for _, f := range r.From {
			own = own && f.NamespaceSelector == nil && f.IPBlock == nil && f.PodSelector != nil &&
				f.PodSelector.MatchLabels["app.kubernetes.io/name"] == pod.Labels["app.kubernetes.io/name"]
		}
		for _, p := range r.Ports {
			if p.Port == nil || ports[p.Port.StrVal] == "" || (p.Protocol != nil && *p.Protocol != ports[p.Port.StrVal]) {
				t.Errorf("the network policy names port %v, not a container port of that protocol", p.Port)
				continue
			}
			reach[p.Port.StrVal] = reach[p.Port.StrVal] || !own
			peers[p.Port.StrVal] = peers[p.Port.StrVal] || own
		}
	}
	for name := range ports {
		open, listed := reach[name]
		switch name {
		case "raft", "gossip-tcp", "gossip-udp":
			if !listed || open {
				t.Errorf("port %s must be admitted from floodgate's pods only", name)
			}
		case "grpc":
			// The pods' Peer calls: a second rule narrowed to the callers'
			// namespaces, as the README says to, must not cut them.
			if !peers[name] {
				t.Errorf("port %s must be admitted from floodgate's pods by a rule of their own", name)
			}
		default:
			if !listed {
				t.Errorf("port %s is admitted from nowhere", name)
			}
		}
	}
}

// Placement and lifecycle: one pod per machine, always, spread over zones
// where possible; a preStop pause with no shell; a released image tag set
// in kustomization.yaml; the volume's ownership set once.
func TestPlacementAndLifecycle(t *testing.T) {
	set := load(t).sets[0]
	pod := set.Spec.Template.Spec
	c := pod.Containers[0]
	aa := pod.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Error("pod anti-affinity on kubernetes.io/hostname must be required: two pods on a machine lose a quorum with it")
	}
	zone := false
	for _, tsc := range pod.TopologySpreadConstraints {
		zone = zone || tsc.TopologyKey == "topology.kubernetes.io/zone" && tsc.MaxSkew == 1 && tsc.WhenUnsatisfiable == corev1.ScheduleAnyway
	}
	if !zone {
		t.Error("no zone spread (maxSkew 1, ScheduleAnyway)")
	}
	if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds < 1 ||
		l.PreStop.Sleep.Seconds*2 > int64(*pod.TerminationGracePeriodSeconds) {
		t.Error("preStop must be a native sleep (distroless has no shell) of a few seconds, well inside the grace period")
	}
	if p := pod.SecurityContext.FSGroupChangePolicy; p == nil || *p != corev1.FSGroupChangeOnRootMismatch {
		t.Error("fsGroupChangePolicy must be OnRootMismatch")
	}
	name, tag, _ := strings.Cut(c.Image, ":")
	if tag == "" || tag == "latest" {
		t.Errorf("image %q: a release tag, not latest", c.Image)
	}
	b, err := os.ReadFile(filepath.Join(manifests, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Resources  []string
		Images     []struct{ Name, NewTag string }
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("kustomization.yaml does not list %s", base)
		}
	}
	if len(k.Images) != 1 || k.Images[0].Name != name || k.Images[0].NewTag == "" || k.Images[0].NewTag == "latest" {
		t.Errorf("kustomization.yaml must set the release tag of %s: %+v", name, k.Images)
	}
}
