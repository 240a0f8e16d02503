# Local development cluster (see docs/local-cluster.md). Included by the
# top-level Makefile, which defines PY (the project's virtualenv python).
#
#   make cluster-build [KUBERNETES=1.37]
#   make cluster-up SCHEDULER=default|volcano|scheduler-plugins|koordinator|native \
#        [NAME=mpi-volcano] [NODES=2] [NODE_CPU=8] [NODE_MEMORY=32Gi] [NODE_GPU=0] \
#        [REAL_NODES=0] [KUEUE=1]
#   make cluster-down [SCHEDULER=...|NAME=...]   (no argument: every local cluster)
#   make cluster-status

CLUSTER_TOOL := hack/cluster/localcluster.py

.PHONY: cluster-build cluster-up cluster-down cluster-status

cluster-build:
	bash hack/cluster/build.sh $(if $(filter-out 0,$(REAL_NODES)),--real-nodes)
	$(if $(KUBERNETES),bash hack/cluster/build.sh --kubernetes $(KUBERNETES))

cluster-up: venv
	@$(PY) $(CLUSTER_TOOL) up --scheduler $(or $(SCHEDULER),default) \
		$(if $(NAME),--name $(NAME)) \
		$(if $(NODES),--nodes $(NODES)) \
		$(if $(NODE_CPU),--node-cpu $(NODE_CPU)) \
		$(if $(NODE_MEMORY),--node-memory $(NODE_MEMORY)) \
		$(if $(NODE_GPU),--node-gpu $(NODE_GPU)) \
		$(if $(REAL_NODES),--real-nodes $(REAL_NODES)) \
		$(if $(filter 1,$(KUEUE)),--kueue)

cluster-down: venv
	@$(PY) $(CLUSTER_TOOL) down \
		$(if $(NAME),--name $(NAME),$(if $(SCHEDULER),--scheduler $(SCHEDULER),--all))

cluster-status: venv
	@$(PY) $(CLUSTER_TOOL) status $(if $(NAME),--name $(NAME))
