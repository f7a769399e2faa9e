trap '' TERM USR2; ENROOT_MOUNT_HOME=no enroot start \
  -e CODER_API_KEY \
  -e WORLD_API_KEY \
  -e FEEDBACK_API_KEY \
  -e NVIDIA_VISIBLE_DEVICES \
  -e NVIDIA_DRIVER_CAPABILITIES \
  -e PYTHONUNBUFFERED=1 \
  -m '/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34:/home/trial' \
  -m '/data sets/mle/spooky-author-identification/prepared/public:/home/data:none:rbind,ro,x-create=dir' \
  '/images/aide x86.sqsh' \
  sh -c 'cd /home/trial && exec python3 -m mle_world.agent --spec /home/trial/spec.json'
