from django.db import models


class Product(models.Model):
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, null=True, default="")
    price = models.DecimalField(max_digits=10, decimal_places=2)
    stock = models.IntegerField(default=0)
    active = models.BooleanField(default=True)
    created = models.DateTimeField()
    attributes = models.JSONField(default=dict)
    sku = models.CharField(max_length=64, default="")

    def __str__(self):
        return self.name
