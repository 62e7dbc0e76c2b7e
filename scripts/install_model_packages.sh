#!/usr/bin/env bash
# Installs the public MindSpore model packages the tests and benchmarks plan:
#   mindcv 0.3.0 (ViT, Swin, ResNet) and mindformers 1.9.0 (LLaMA).
# mindformers 1.9.0 asks for mindspore~=2.9.0 and numpy<2; it runs on MindSpore 2.10.0 when
# installed without its dependencies and with the run-time needs below pinned by hand (numpy
# stays below 2: with numpy 2, MindSpore 2.10 fails on Tensor([0], dtype=ms.bfloat16)). Which
# mindformers and mindcv models then plan and pass check: docs/networks.md; README.md says how
# the tests use them.
set -euo pipefail
PY=${PYTHON:-python}
"$PY" -m pip install -q --no-deps mindformers==1.9.0 mindcv==0.3.0
"$PY" -m pip install -q \
  "numpy==1.26.4" "datasets==4.0.0" "pandas==2.2.3" "pyarrow==19.0.0" "nltk==3.9.1" \
  "mindpet==1.0.4" "Deprecated==1.3.1" "jieba==0.42.1" "rouge-chinese==1.0.3" \
  "sentencepiece==0.2.3" "tiktoken==0.14.0" "tokenizers==0.23.3" "tensorboardX==2.6.5" \
  "regex" "requests" "PyYAML" "tqdm"
# Fail loudly here, not in a test, if the import chain breaks.
"$PY" - <<'PY'
import logging, warnings
warnings.filterwarnings("ignore")
from mindformers.models.llama import LlamaConfig, LlamaForCausalLM  # noqa: F401
import mindcv  # noqa: F401
print("model packages: mindformers 1.9.0 and mindcv 0.3.0 import")
PY
