"""Static checks of deploy/: the container image, the compose stack, Kubernetes manifests, dashboards."""
