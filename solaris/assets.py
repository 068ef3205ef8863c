"""The Airflow Assets the SOLARIS DAGs share, declared once: ``solaris_train`` emits them when it promotes a
chain, ``solaris_precompute`` reads the VM champion's as its inlet. Imports only ``airflow.sdk``."""

from __future__ import annotations

from airflow.sdk import Asset

FM_CHAMPION = Asset(name="solaris_fm_champion", uri="x-solaris://mlflow/solaris-fm/champion")
AE_CHAMPION = Asset(name="solaris_ae_champion", uri="x-solaris://mlflow/solaris-ae/champion")
# Any configured VM's champion moved (solaris.vms): one Asset, so a new VM needs no new DAG wiring.
VM_CHAMPION = Asset(name="solaris_vm_champion", uri="x-solaris://mlflow/solaris-vm/champion")
