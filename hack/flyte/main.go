// Command flyte-mpi runs Flyte's own MPI plugin (flyteplugins' kfoperators/mpi, the code in
// flytepropeller that turns an `mpi` task into a kubeflow.org/v1 MPIJob and reads its phase
// back) outside propeller. The plugin module's own mocks stand in for propeller's task
// context, as in the plugin's tests. Both subcommands read one JSON object on stdin and write
// one on stdout:
//
//	flyte-mpi build              < {"taskTemplate": {...}, "name": "...", "namespace": "...", "serviceAccount": "..."}
//	flyte-mpi phase [-timeout D] < an MPIJob as the API server returns it
//
// Exit status: 0 with the answer on stdout; 3 when BuildResource refuses the template
// ({"error": "..."} on stdout); 2 for bad input or usage (a message on stderr).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/stretchr/testify/mock"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core/mocks"
	ioMocks "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/io/mocks"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
	pluginsUtils "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/utils"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/common"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi"
	"github.com/flyteorg/flyte/flytestdlib/config"
	"github.com/flyteorg/flyte/flytestdlib/storage"
)

// buildInput is what `build` reads. Name is the generated name propeller gives the task
// execution (the MPIJob's name); it is also the workflow execution's name in the execution
// identifier. Labels and annotations are the execution's (propeller merges them into the
// object's and the pods' metadata).
type buildInput struct {
	TaskTemplate   json.RawMessage   `json:"taskTemplate"`
	Name           string            `json:"name"`
	Namespace      string            `json:"namespace"`
	ServiceAccount string            `json:"serviceAccount"`
	Project        string            `json:"project"`
	Domain         string            `json:"domain"`
	Labels         map[string]string `json:"labels"`
	Annotations    map[string]string `json:"annotations"`
}

type taskLog struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
}

// phaseOutput is what `phase` writes: the PhaseInfo GetTaskPhase returned, and its Go error.
type phaseOutput struct {
	Phase   string    `json:"phase"`
	Version uint32    `json:"version"`
	Reason  string    `json:"reason"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Error   *string   `json:"error"`
	Logs    []taskLog `json:"logs"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "phase":
		err = phase(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flyte-mpi %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: flyte-mpi build < build-input.json\n       flyte-mpi phase [-timeout 1m] < mpijob.json")
	os.Exit(2)
}

func mpiPlugin() (k8s.Plugin, error) {
	for _, entry := range pluginmachinery.PluginRegistry().GetK8sPlugins() {
		if entry.ID == common.MPITaskType {
			return entry.Plugin, nil
		}
	}
	return nil, fmt.Errorf("flyteplugins registered no %q plugin", common.MPITaskType)
}

func readStdin(v any) error {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func writeJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var in buildInput
	if err := readStdin(&in); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	for _, field := range [][2]string{{"name", in.Name}, {"namespace", in.Namespace}, {"serviceAccount", in.ServiceAccount}} {
		if field[1] == "" {
			return fmt.Errorf("the input has no %q", field[0])
		}
	}
	if len(in.TaskTemplate) == 0 {
		return fmt.Errorf("the input has no \"taskTemplate\"")
	}
	if in.Project == "" {
		in.Project = "flytesnacks"
	}
	if in.Domain == "" {
		in.Domain = "development"
	}
	template := &core.TaskTemplate{}
	// Fields newer than this flyteidl are dropped, as a protobuf round trip through Flyte's
	// admin would drop them; they are named on stderr.
	if err := protojson.Unmarshal(in.TaskTemplate, template); err != nil {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(in.TaskTemplate, template); err != nil {
			return fmt.Errorf("the task template: %w", err)
		}
		fmt.Fprintf(os.Stderr, "flyte-mpi build: ignored what flyteidl does not know in the task template: %v\n", err)
	}
	plugin, err := mpiPlugin()
	if err != nil {
		return err
	}
	ctx := context.Background()
	taskCtx := taskContext(template, in)
	obj, err := plugin.BuildResource(ctx, taskCtx)
	if err != nil {
		if werr := writeJSON(map[string]string{"error": err.Error()}); werr != nil {
			return werr
		}
		os.Exit(3)
	}
	addObjectMetadata(taskCtx.TaskExecutionMetadata(), obj, template)
	return writeJSON(obj)
}

// addObjectMetadata does what propeller's PluginManager.addObjectMetadata does with the
// default k8s plugin configuration (no default labels or annotations), less the owner
// reference to the FlyteWorkflow and the finalizer, which name objects this harness has not.
func addObjectMetadata(md pluginsCore.TaskExecutionMetadata, o client.Object, template *core.TaskTemplate) {
	k8sMetadata := template.GetMetadata().GetMetadata()
	o.SetNamespace(md.GetNamespace())
	o.SetAnnotations(pluginsUtils.UnionMaps(o.GetAnnotations(), k8sMetadata.GetAnnotations(), pluginsUtils.CopyMap(md.GetAnnotations())))
	o.SetLabels(pluginsUtils.UnionMaps(o.GetLabels(), k8sMetadata.GetLabels(), pluginsUtils.CopyMap(md.GetLabels())))
	o.SetName(md.GetTaskExecutionID().GetGeneratedName())
	if errs := validation.IsDNS1123Subdomain(o.GetName()); len(errs) > 0 {
		o.SetName(pluginsUtils.ConvertToDNS1123SubdomainCompatibleString(o.GetName()))
	}
}

// taskContext is a task execution context made of the plugin module's mocks, answering what
// propeller would for one attempt of node n0 of the execution `in.Name`.
func taskContext(template *core.TaskTemplate, in buildInput) *mocks.TaskExecutionContext {
	dataPrefix := storage.DataReference(fmt.Sprintf("s3://flyte/metadata/%s/n0/data", in.Name))
	rawPrefix := storage.DataReference(fmt.Sprintf("s3://flyte/data/%s", in.Name))

	inputReader := &ioMocks.InputReader{}
	inputReader.EXPECT().GetInputPrefixPath().Return(dataPrefix)
	inputReader.EXPECT().GetInputPath().Return(dataPrefix + "/inputs.pb")
	inputReader.EXPECT().Get(mock.Anything).Return(&core.LiteralMap{}, nil)

	outputWriter := &ioMocks.OutputWriter{}
	outputWriter.EXPECT().GetOutputPrefixPath().Return(dataPrefix + "/0")
	outputWriter.EXPECT().GetOutputPath().Return(dataPrefix + "/0/outputs.pb")
	outputWriter.EXPECT().GetErrorPath().Return(dataPrefix + "/0/error.pb")
	outputWriter.EXPECT().GetRawOutputPrefix().Return(rawPrefix)
	outputWriter.EXPECT().GetCheckpointPrefix().Return(rawPrefix + "/_flytecheckpoints")
	outputWriter.EXPECT().GetPreviousCheckpointsPrefix().Return("")

	taskReader := &mocks.TaskReader{}
	taskReader.EXPECT().Read(mock.Anything).Return(template, nil)

	taskID := &mocks.TaskExecutionID{}
	taskID.EXPECT().GetID().Return(core.TaskExecutionIdentifier{
		TaskId: &core.Identifier{
			ResourceType: core.ResourceType_TASK,
			Project:      in.Project,
			Domain:       in.Domain,
			Name:         template.GetId().GetName(),
			Version:      template.GetId().GetVersion(),
		},
		NodeExecutionId: &core.NodeExecutionIdentifier{
			NodeId: "n0",
			ExecutionId: &core.WorkflowExecutionIdentifier{
				Project: in.Project,
				Domain:  in.Domain,
				Name:    in.Name,
			},
		},
	})
	taskID.EXPECT().GetGeneratedName().Return(in.Name)
	taskID.EXPECT().GetGeneratedNameWith(mock.Anything, mock.Anything).Return(in.Name, nil)
	taskID.EXPECT().GetUniqueNodeID().Return("n0")

	overrides := &mocks.TaskOverrides{}
	// A node without resource overrides: what propeller's compiler makes of none.
	overrides.EXPECT().GetResources().Return(&corev1.ResourceRequirements{})
	overrides.EXPECT().GetExtendedResources().Return(nil)
	overrides.EXPECT().GetContainerImage().Return("")
	overrides.EXPECT().GetPodTemplate().Return(nil)
	overrides.EXPECT().GetConfig().Return(nil)

	md := &mocks.TaskExecutionMetadata{}
	md.EXPECT().GetOwnerID().Return(types.NamespacedName{Namespace: in.Namespace, Name: in.Name})
	md.EXPECT().GetTaskExecutionID().Return(taskID)
	md.EXPECT().GetNamespace().Return(in.Namespace)
	md.EXPECT().GetOwnerReference().Return(metav1.OwnerReference{})
	md.EXPECT().GetOverrides().Return(overrides)
	md.EXPECT().GetLabels().Return(in.Labels)
	md.EXPECT().GetAnnotations().Return(in.Annotations)
	md.EXPECT().GetMaxAttempts().Return(1)
	md.EXPECT().GetK8sServiceAccount().Return(in.ServiceAccount)
	md.EXPECT().GetSecurityContext().Return(core.SecurityContext{})
	md.EXPECT().IsInterruptible().Return(false)
	md.EXPECT().GetPlatformResources().Return(&corev1.ResourceRequirements{})
	md.EXPECT().GetInterruptibleFailureThreshold().Return(0)
	md.EXPECT().GetEnvironmentVariables().Return(nil)
	md.EXPECT().GetConsoleURL().Return("")

	// No earlier state: the phase version stays as GetTaskPhase computes it.
	stateReader := &mocks.PluginStateReader{}
	stateReader.EXPECT().GetStateVersion().Return(0)
	stateReader.EXPECT().Get(mock.Anything).Return(0, nil)

	taskCtx := &mocks.TaskExecutionContext{}
	taskCtx.EXPECT().InputReader().Return(inputReader)
	taskCtx.EXPECT().OutputWriter().Return(outputWriter)
	taskCtx.EXPECT().TaskReader().Return(taskReader)
	taskCtx.EXPECT().TaskExecutionMetadata().Return(md)
	taskCtx.EXPECT().PluginStateReader().Return(stateReader)
	taskCtx.EXPECT().DataStore().Return(nil)
	return taskCtx
}

func phase(args []string) error {
	fs := flag.NewFlagSet("phase", flag.ContinueOnError)
	timeout := fs.Duration("timeout", common.GetConfig().Timeout.Duration,
		"plugins.kf-operator.timeout: how long after creation a job without status.startTime is an error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := common.SetConfig(&common.Config{Timeout: config.Duration{Duration: *timeout}}); err != nil {
		return err
	}
	var job kubeflowv1.MPIJob
	if err := readStdin(&job); err != nil {
		return fmt.Errorf("reading the MPIJob: %w", err)
	}
	// Propeller watches only this version and kind; anything else would never reach it.
	if job.APIVersion != kubeflowv1.SchemeGroupVersion.String() || job.Kind != kubeflowv1.MPIJobKind {
		return fmt.Errorf("the input is %s %s, not %s %s", job.APIVersion, job.Kind,
			kubeflowv1.SchemeGroupVersion.String(), kubeflowv1.MPIJobKind)
	}
	plugin, err := mpiPlugin()
	if err != nil {
		return err
	}
	// GetTaskPhase reads the task template only for log links.
	template := &core.TaskTemplate{Id: &core.Identifier{ResourceType: core.ResourceType_TASK, Name: job.Name}}
	taskCtx := taskContext(template, buildInput{Name: job.Name, Namespace: job.Namespace})
	info, perr := plugin.GetTaskPhase(context.Background(), taskCtx, &job)
	out := phaseOutput{
		Phase:   strings.TrimPrefix(info.Phase().String(), "Phase"),
		Version: info.Version(),
		Reason:  info.Reason(),
		Code:    info.Err().GetCode(),
		Message: info.Err().GetMessage(),
		Logs:    []taskLog{},
	}
	if perr != nil {
		text := perr.Error()
		out.Error = &text
	}
	if info.Info() != nil {
		for _, l := range info.Info().Logs {
			out.Logs = append(out.Logs, taskLog{Name: l.GetName(), URI: l.GetUri()})
		}
	}
	return writeJSON(out)
}
