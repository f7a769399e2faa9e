NVIDIA_VISIBLE_DEVICES=void srun --overlap --ntasks=1 \
  --container-image=/images/aide.sqsh \
  --container-mounts='/scratch/my runs/it'"'"'s "quoted" $HOME;ls/runs/wm-rank4/spooky-author-identification_seed34:/home/trial,/data sets/mle/spooky-author-identification/prepared/public:/home/data:ro' \
  --container-workdir=/home/trial \
  --no-container-mount-home \
  --container-env=CUDA_VISIBLE_DEVICES,CODER_API_KEY,WORLD_API_KEY,FEEDBACK_API_KEY \
  --export=ALL,PYTHONUNBUFFERED=1 \
  python3 -m mle_world.agent --spec /home/trial/spec.json
