trap '' TERM USR2; env -i \
  PATH=/opt/py/bin:/usr/bin:/bin \
  HOME=/home/trial \
  LANG=C.UTF-8 \
  PYTHONUNBUFFERED=1 \
  ${CUDA_VISIBLE_DEVICES+CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"} \
  ${CODER_API_KEY+CODER_API_KEY="$CODER_API_KEY"} \
  ${WORLD_API_KEY+WORLD_API_KEY="$WORLD_API_KEY"} \
  ${FEEDBACK_API_KEY+FEEDBACK_API_KEY="$FEEDBACK_API_KEY"} \
  bwrap --die-with-parent --unshare-pid --unshare-ipc \
  $([ "$(id -u)" = 0 ] || echo --unshare-user --uid 0 --gid 0 --cap-add ALL) \
  --proc /proc --dev /dev --tmpfs /tmp \
  --dev-bind-try /dev/nvidia0 /dev/nvidia0 \
  --dev-bind-try /dev/nvidia1 /dev/nvidia1 \
  --dev-bind-try /dev/nvidia2 /dev/nvidia2 \
  --dev-bind-try /dev/nvidia3 /dev/nvidia3 \
  --dev-bind-try /dev/nvidia4 /dev/nvidia4 \
  --dev-bind-try /dev/nvidia5 /dev/nvidia5 \
  --dev-bind-try /dev/nvidia6 /dev/nvidia6 \
  --dev-bind-try /dev/nvidia7 /dev/nvidia7 \
  --dev-bind-try /dev/nvidiactl /dev/nvidiactl \
  --dev-bind-try /dev/nvidia-uvm /dev/nvidia-uvm \
  --dev-bind-try /dev/nvidia-uvm-tools /dev/nvidia-uvm-tools \
  --ro-bind-try /usr /usr \
  --ro-bind-try /bin /bin \
  --ro-bind-try /sbin /sbin \
  --ro-bind-try /lib /lib \
  --ro-bind-try /lib32 /lib32 \
  --ro-bind-try /lib64 /lib64 \
  --ro-bind-try /etc /etc \
  --ro-bind /opt/py /opt/py \
  --ro-bind '/src tree' '/src tree' \
  --bind '/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34' /home/trial \
  --ro-bind '/data sets/mle/spooky-author-identification/prepared/public' /home/data \
  --chdir /home/trial \
  /opt/py/bin/python -m mle_world.agent --spec /home/trial/spec.json
