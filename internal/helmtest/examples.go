package helmtest

import (
	"fmt"
	"strings"
)

// Web is a chart whose Deployment has an init container, an operand image
// in an env var (found only through imagePaths) and env values that are not
// images, and whose sub-chart "sub" is included under the alias "worker"
// (oc-mirror #1037), its image set by the parent's values. Every image is
// reg/apps/<name>:<tag>.
func Web(version, reg, tag string) Chart {
	values := strings.ReplaceAll(`image:
  repository: REG/apps/web
  tag: TAG
initImage: REG/apps/init:TAG
operandImage: REG/apps/operand:TAG
worker:
  enabled: true
  image: REG/apps/worker:TAG
`, "REG", reg)
	values = strings.ReplaceAll(values, "TAG", tag)
	return New("web", version, `dependencies:
- name: sub
  version: 0.1.0
  alias: worker
  condition: worker.enabled
`, map[string]string{
		"values.yaml": values,
		"templates/_helpers.tpl": `{{- define "web.fullname" -}}{{ .Release.Name }}-web{{- end -}}
`,
		"templates/NOTES.txt": "Installed {{ .Release.Name }}; image {{ .Values.image.repository }}\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "web.fullname" . }}
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: {{ .Values.initImage }}
      containers:
      - name: web
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
        env:
        - name: OPERAND_IMAGE
          value: {{ .Values.operandImage }}
        - name: VERBOSE
          value: "true"
        - name: ENDPOINT
          value: https://example.com:8443/api
        - name: PORT
          value: "8080"
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "web.fullname" . }}
spec:
  ports:
  - port: 80
`,
		"charts/sub/Chart.yaml":  "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/values.yaml": fmt.Sprintf("image: %s/apps/unused:v0\n", reg),
		"charts/sub/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Name }}
spec:
  template:
    spec:
      containers:
      - name: worker
        image: {{ .Values.image }}
`,
	})
}

// Jobs is a chart whose only workload is a CronJob.
func Jobs(version, image string) Chart {
	return New("jobs", version, "", map[string]string{
		"values.yaml": "image: " + image + "\n",
		"templates/cronjob.yaml": `apiVersion: batch/v1
kind: CronJob
metadata:
  name: cleanup
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: cleanup
            image: {{ .Values.image }}
`,
	})
}

// Pod is a chart with one bare Pod running image.
func Pod(name, version, image string) Chart {
	return New(name, version, "", map[string]string{
		"values.yaml": "image: " + image + "\n",
		"templates/pod.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Chart.Name }}
spec:
  containers:
  - name: main
    image: {{ .Values.image }}
`,
	})
}

// NeedsValues is a chart that cannot render with its default values.
func NeedsValues(name, version string) Chart {
	return New(name, version, "", map[string]string{
		"values.yaml": "image: {}\n",
		"templates/pod.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: x
spec:
  containers:
  - name: main
    image: {{ required "set image.tag" .Values.image.tag }}
`,
	})
}
