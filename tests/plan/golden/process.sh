trap '' TERM USR2; cd '/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34' && env -i \
  PATH=/usr/local/bin:/usr/bin:/bin \
  'HOME=/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34' \
  LANG=C.UTF-8 \
  PYTHONUNBUFFERED=1 \
  ${CUDA_VISIBLE_DEVICES+CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"} \
  ${CODER_API_KEY+CODER_API_KEY="$CODER_API_KEY"} \
  ${WORLD_API_KEY+WORLD_API_KEY="$WORLD_API_KEY"} \
  ${FEEDBACK_API_KEY+FEEDBACK_API_KEY="$FEEDBACK_API_KEY"} \
  /opt/py/bin/python -m mle_world.agent --spec '/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34/spec.json'
