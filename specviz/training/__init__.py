"""Self-distillation data (distill) and head training (train) for the EAGLE and Medusa drafters."""
