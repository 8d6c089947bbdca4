"""What is minimised: the pipelines' training losses (losses.py), sentence-embedding losses (sentence_losses.py),
distillation (distill.py), the regularisers R-Drop and SMART, and the gradient surgery PCGrad and GradVac."""
