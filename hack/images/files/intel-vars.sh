# The environment Intel MPI needs, as oneAPI's setvars.sh would set it for the
# MPI component installed under /opt/intel/mpi.
export I_MPI_ROOT=/opt/intel/mpi
case ":${PATH}:" in *":${I_MPI_ROOT}/bin:"*) ;; *) export PATH="${I_MPI_ROOT}/bin:${PATH}" ;; esac
export LD_LIBRARY_PATH="${I_MPI_ROOT}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export FI_PROVIDER_PATH="${I_MPI_ROOT}/lib"
