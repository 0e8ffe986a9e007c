"""Exact parameter count of a Hugging Face config: the transformers model built on the meta device.

Inputs: a parsed ``config.json`` (a dict). Outputs: ``sum(p.numel() for p in
model.parameters())`` (tied weights once) of the class its ``architectures`` names (else
``AutoModelForCausalLM``, else ``AutoModel``), built under ``torch.device("meta")`` as
accelerate's ``init_empty_weights`` does: no weights are allocated or downloaded, nothing touches
the network. Needs the optional ``exact`` extra (transformers); lives here because this package
is the only one that imports torch.
"""

from __future__ import annotations

from typing import Any

from rightsize.errors import RightsizeError


class ExactCountError(RightsizeError):
    """transformers is missing or cannot build the model from this config."""


def exact_param_count(config: dict[str, Any]) -> tuple[int, str]:
    """(parameters, the transformers class used)."""
    try:
        import torch
        import transformers
    except ImportError:
        raise ExactCountError("--exact needs transformers and torch:"
                              " pip install rightsize[exact]") from None
    import warnings

    transformers.logging.set_verbosity_error()  # the CLI prints one line, not library chatter
    warnings.filterwarnings("ignore", module="transformers")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ExactCountError("--exact needs the config's model_type")
    fields = {k: v for k, v in config.items() if k != "model_type"}
    try:
        hf_config = transformers.AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise ExactCountError(f"transformers {transformers.__version__} cannot read this"
                              f" config: {_first_line(exc)}") from None
    classes = [getattr(transformers, a, None) for a in config.get("architectures") or []
               if isinstance(a, str)]
    candidates = [c for c in classes if c is not None] + [
        transformers.AutoModelForCausalLM, transformers.AutoModel]
    errors = []
    for cls in candidates:
        try:
            with torch.device("meta"):
                model = (cls.from_config(hf_config) if hasattr(cls, "from_config")
                         and cls.__name__.startswith("Auto") else cls(hf_config))
        except (ValueError, KeyError, TypeError, AttributeError, RuntimeError) as exc:
            errors.append(f"{cls.__name__}: {_first_line(exc)}")
            continue
        return sum(p.numel() for p in model.parameters()), type(model).__name__
    raise ExactCountError(f"transformers {transformers.__version__} cannot build a model from"
                          f" this config ({'; '.join(errors)[:300]})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
